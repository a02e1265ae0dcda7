"""What is meant to be shared holds no path of the machine it was made on: the model card names each local input by
its name and the sha256 of its contents, and an exported open-unlearning folder holds numbers only (the saved run
config, which a push uploads, is checked in ``test_bad_input.py``: relative paths only)."""

from __future__ import annotations

import hashlib
import json
import re

from fixtures.runs import provenance_record, write_results
from unlearn_app.checkpoint import model_card
from unlearn_app.cli import main
from unlearn_methods.config import RunConfig


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_model_card_names_local_inputs_by_name_and_content_hash(tmp_path):
    base = tmp_path / "models" / "base-7b"
    base.mkdir(parents=True)
    files = {"config.json": b'{"model_type": "llama"}', "model.safetensors": b"\x00\x01weights"}
    for name, data in files.items():
        (base / name).write_bytes(data)
    (base / "README.md").write_text("a card that does not change the weights")
    refs = tmp_path / "refs" / "references.json"
    refs.parent.mkdir()
    refs.write_bytes(b'{"format": "blur_references/1"}')
    cfg = RunConfig(model=str(base), out=str(tmp_path / "out"), data="blur", blur_source="whp",
                    blur_references=str(refs), forget="rwku_forget", retain="rwku_retain")
    card = model_card.render(cfg, {}, "a summary", {}, adapter=True)
    assert str(tmp_path) not in card
    # a folder: sha256 over "<relative name>\0<file sha256>\n" in name order, the model card (README.md) left out
    folder = _sha("".join(f"{name}\0{_sha(data)}\n" for name, data in sorted(files.items())).encode())
    rows = re.findall(r"^\| (--[\w-]+) \| `([^`]+)` \| `([0-9a-f]{64})` \|$", card, flags=re.M)
    assert rows == [("--model", "base-7b", folder),
                    ("--blur-references", "references.json", _sha(b'{"format": "blur_references/1"}'))]
    assert """--metadata '{"blur_references": "references.json"}'""" in card
    assert "the local model `base-7b`" in card


def test_export_ou_folder_holds_no_local_path(tmp_path):
    path = write_results(tmp_path / "run", {"tofu_forget01": {"forget_quality": 0.5, "model_utility": 0.6, "forget_truth_ratio": 0.5}},
                         provenance={"tofu_forget01": provenance_record()})
    data = json.loads(path.read_text())
    local = str(tmp_path / "data" / "forget01.json")
    data["configs"]["tofu_forget01"]["provenance"]["data"][0]["path"] = local
    data["configs"]["tofu_forget01"]["unlearning_reference"] = {"path": str(tmp_path / "ref" / "TOFU_EVAL.json"),
                                                                "forget_truth_ratio": [0.25, 0.75]}
    data["config"] = {"model": "hf", "model_args": f"pretrained={tmp_path / 'model'}"}
    data["model_name"] = str(tmp_path / "model")
    path.write_text(json.dumps(data))
    assert str(tmp_path) in path.read_text()  # lm-eval's results file does hold them
    assert main(["export-ou", str(path), "--out", str(tmp_path / "ou")]) == 0
    written = sorted((tmp_path / "ou").rglob("*"))
    assert [p.name for p in written] == ["TOFU_EVAL.json", "TOFU_SUMMARY.json"]
    for p in written:
        assert str(tmp_path) not in p.read_text() and "/" not in json.dumps(json.loads(p.read_text())), p.name
    logs = json.loads((tmp_path / "ou" / "TOFU_EVAL.json").read_text())
    assert logs["forget_truth_ratio"]["value_by_index"] == {"0": {"score": 0.25}, "1": {"score": 0.75}}
