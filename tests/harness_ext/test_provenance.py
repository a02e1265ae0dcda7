"""Provenance: content hashes, the data a task read while it was built, and the record in every task's results."""

import hashlib
import json

from harness_ext import provenance, tasks_dir


def test_fingerprints_hash_contents_not_names_or_times(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    f = tmp_path / "a.json"
    f.write_text("x")
    assert provenance.file_sha256(f) == hashlib.sha256(b"x").hexdigest() == provenance.path_fingerprint(f)
    folder = tmp_path / "m"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "w.bin").write_bytes(b"1")
    first = provenance.path_fingerprint(folder)
    (folder / "README.md").write_text("card")
    assert provenance.path_fingerprint(folder, skip=("README.md",)) == first != provenance.path_fingerprint(folder)
    (folder / "sub" / "w.bin").write_bytes(b"2")
    assert provenance.path_fingerprint(folder, skip=("README.md",)) != first
    # cached (the model card's): the same value, and a file changed in size read again
    assert provenance.path_fingerprint(folder, cached=True) == provenance.path_fingerprint(folder)
    (folder / "sub" / "w.bin").write_bytes(b"33")
    assert provenance.path_fingerprint(folder, cached=True) == provenance.path_fingerprint(folder)


def test_recording_collects_only_what_is_read_inside(tmp_path):
    f = tmp_path / "d.json"
    f.write_text("{}")
    provenance.note_data_source("local", "outside", path=f)  # nobody records: ignored
    with provenance.recording() as outer:
        provenance.note_data_source("hub", "org/ds", "cfg", revision="b" * 40)
        with provenance.recording() as inner:
            provenance.note_data_source("local", "org/ds", "cfg2", path=f)
    assert inner == [{"kind": "local", "source": "org/ds", "config": "cfg2", "path": str(f),
                      "sha256": provenance.file_sha256(f)}]
    assert [e["source"] for e in outer] == ["org/ds", "org/ds"] and outer[0]["revision"] == "b" * 40
    assert provenance.data_fingerprint(outer) != provenance.data_fingerprint(inner)
    commit = provenance.git_commit()
    assert commit is None or len(commit.split("+")[0]) == 40


def test_tofu_task_records_its_data_modes_and_reference(demo_data_dir, tmp_path):
    from lm_eval.tasks import TaskManager

    ref = tmp_path / "ref" / "results_2026.json"
    ref.parent.mkdir()
    n_forget = len((demo_data_dir / "forget01_perturbed.json").read_text().splitlines())  # the same item count
    record = {"forget_split": "forget01", "forget_truth_ratio": [0.5] * n_forget, "mia_auc": {}, "answer_scoring": "tofu"}
    ref.write_text(json.dumps({"configs": {"tofu_forget01": {"unlearning_reference": record}}}))
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                          metadata={"data_dir": str(demo_data_dir), "answer_scoring": "tofu",
                                    "reference": str(ref.parent), "mia_reference": False})  # no per-item losses
    task = manager.load(["tofu_forget01_likelihood"])["tasks"]["tofu_forget01_likelihood"]
    prov = task.dump_config()["provenance"]
    assert prov["package"] == "lm-eval-unlearning" and prov["version"] == provenance.package_version()
    files = {d["config"]: d["sha256"] for d in prov["data"]}
    assert files["forget01_perturbed"] == provenance.file_sha256(demo_data_dir / "forget01_perturbed.json")
    assert set(files) == {"forget01_perturbed", "retain_perturbed", "real_authors_perturbed", "world_facts_perturbed",
                          "holdout01"}
    assert prov["metric_modes"]["answer_scoring"] == "tofu" and prov["metric_modes"]["truth_ratio_mean"] == "geometric"
    assert "data_dir" not in prov["metric_modes"]
    assert prov["reference"]["path"] == str(ref.parent)
    assert prov["reference"]["sha256"] == provenance.path_fingerprint(ref.parent)
