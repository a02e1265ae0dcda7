"""The leaderboard against a hostile submitter: what the site publishes (only the listed files, regular files inside
the submission folder, each checked against its sha256), what is refused before anything is read (absolute and
``..`` paths, symbolic links, unsafe task names, a relabelled benchmark, a folder not named by its id), what
"validated" means (every shown number recomputed), references that are the run itself, bad input as one line
(exit 2), and a rebuild that removes what it wrote for a submission no longer on the board."""

import csv
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from fixtures.leaderboard import TASK, tofu_records, write_tofu_run
from unlearn_app.cli import main
from unlearn_app.leaderboard.importers import Row
from unlearn_app.leaderboard.publish import MANIFEST
from unlearn_app.leaderboard.reference import files_digest
from unlearn_app.leaderboard.site import pareto_picture, picture_name
from unlearn_app.leaderboard.store import save_local
from unlearn_app.leaderboard.submission import build, digest
from unlearn_app.leaderboard.validate import Check, check_folder, unique

REF = tofu_records(1)
ITEMS = f"items/{TASK}/TOFU_EVAL.json"
REFERENCE = f"reference/{TASK}/TOFU_EVAL.json"


def submit(tmp_path: Path, name: str = "npo", seed: int = 2, board: str = "board", **kw) -> Path:
    """A genuine submission of a TOFU run (per-item values and a reference) in ``tmp_path/board/submissions``."""
    if not (tmp_path / "ref").exists():
        write_tofu_run(tmp_path / "ref", REF)
    write_tofu_run(tmp_path / name, tofu_records(seed, 0.3), REF)
    built = build([tmp_path / name], reference=tmp_path / "ref", model_dir=tmp_path / name, method=kw.pop("method", name),
                  **kw)
    return save_local(built, tmp_path / board)


def reseal(folder: Path, edit=None, reference_digest: bool = True) -> Path:
    """Edit ``folder``'s submission.json, then make its hashes, reference digest and id agree with the content again
    (as a submitter who edits a submission would), renaming the folder by the new id."""
    path = folder / "submission.json"
    record = json.loads(path.read_text())
    if edit:
        edit(record)
    record["files"] = {rel: hashlib.sha256((folder / rel).read_bytes()).hexdigest() for rel in record["files"]
                       if (folder / rel).is_file()}
    refs = {e["reference"] for e in record["results"].values() if e.get("reference")}
    if reference_digest and record.get("reference") and refs <= set(record["files"]):
        record["reference"]["sha256"] = files_digest({r: record["files"][r] for r in refs})
    record["id"] = record["id"][:-12] + digest(record)[:12]
    path.write_text(json.dumps(record))
    return folder.rename(folder.with_name(record["id"]))


def refused(capsys, folder: Path, *words: str) -> str:
    """``leaderboard validate`` refuses ``folder`` with one line holding ``words``, exit 2; that line."""
    capsys.readouterr()
    assert main(["leaderboard", "validate", str(folder)]) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    [line] = out.splitlines()
    assert line.startswith("REFUSED ") and all(w in line for w in words), line
    return line


# --------------------------------------------------------------------------- 1-3: only listed, regular files
def test_only_the_listed_files_are_published(tmp_path, capsys):
    folder = submit(tmp_path)
    (folder / "evil.html").write_text("<script>alert(1)</script>")
    (folder / "items" / "notes.json").write_text("{}")
    (folder / "page.html").mkdir()
    assert check_folder(folder).validated
    site = tmp_path / "site"
    assert main(["leaderboard", "build", "--from", str(tmp_path / "board"), "--out", str(site)]) == 0
    data = site / "data" / folder.name
    listed = json.loads((folder / "submission.json").read_text())["files"]
    folders = {"/".join(rel.split("/")[:i]) for rel in listed for i in range(1, rel.count("/") + 1)}
    assert {ITEMS, REFERENCE} <= set(listed)
    assert sorted(p.relative_to(data).as_posix() for p in data.rglob("*")) == sorted(
        [*folders, *listed, "submission.json"])
    assert (data / ITEMS).read_bytes() == (folder / ITEMS).read_bytes()
    assert "evil.html" not in (site / "submissions" / f"{folder.name}.html").read_text()


@pytest.mark.parametrize("where", ["file", "folder", "submission.json", "submission folder", "unlisted", "to /etc"])
def test_a_symbolic_link_in_a_submission_is_refused_not_followed(tmp_path, capsys, where):
    folder = submit(tmp_path)
    secret = tmp_path / "outside"
    secret.mkdir()
    if where == "file":  # the listed per-item file, a link to a copy of itself outside (the same hash)
        shutil.copy(folder / ITEMS, secret / "TOFU_EVAL.json")
        (folder / ITEMS).unlink()
        (folder / ITEMS).symlink_to(secret / "TOFU_EVAL.json")
    elif where == "folder":
        shutil.move(folder / "items", secret / "items")
        (folder / "items").symlink_to(secret / "items")
    elif where == "submission.json":
        shutil.move(folder / "submission.json", secret / "submission.json")
        (folder / "submission.json").symlink_to(secret / "submission.json")
    elif where == "submission folder":
        shutil.move(folder, secret / folder.name)
        folder.symlink_to(secret / folder.name)
    elif where == "unlisted":  # a link no file of the record names: refused all the same, never read
        (secret / "key.json").write_text('{"secret": 1}')
        (folder / "items" / "key.json").symlink_to(secret / "key.json")
    else:
        (folder / "etc").symlink_to("/etc")
    refused(capsys, tmp_path / "board", "symbolic link")
    site = tmp_path / "site"
    assert main(["leaderboard", "build", "--from", str(tmp_path / "board"), "--out", str(site)]) == 0
    assert "skipped" in capsys.readouterr().err
    assert not (site / "data").exists() or not any((site / "data").iterdir())
    assert not (site / "submissions" / f"{folder.name}.html").exists()


@pytest.mark.parametrize("field", ["items", "reference", "files"])
@pytest.mark.parametrize("path", ["absolute", "dotdot"])
def test_paths_out_of_the_folder_are_refused_before_anything_is_read(tmp_path, capsys, monkeypatch, field, path):
    folder = submit(tmp_path)
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": 1}')
    rel = str(secret) if path == "absolute" else "../../../secret.json"
    record = json.loads((folder / "submission.json").read_text())
    if field == "files":
        record["files"][rel] = hashlib.sha256(secret.read_bytes()).hexdigest()
    else:
        record["results"][TASK][field] = rel
        record["files"][rel] = hashlib.sha256(secret.read_bytes()).hexdigest()
    record["id"] = record["id"][:-12] + digest(record)[:12]
    (folder / "submission.json").write_text(json.dumps(record))
    folder = folder.rename(folder.with_name(record["id"]))
    touched = []
    for name in ("open", "stat", "lstat"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda p, *a, _real=real, **k: touched.append(str(p)) or _real(p, *a, **k))
    line = refused(capsys, folder, "absolute path" if path == "absolute" else "leads out of the submission folder")
    monkeypatch.undo()
    assert not any("secret" in p for p in touched)  # not opened, not even probed
    assert "missing" not in line and hashlib.sha256(secret.read_bytes()).hexdigest()[:12] not in line


def _linked(folder: Path, rel: str, outside: Path) -> None:
    """``folder/rel`` replaced by a link to an identical copy outside (same bytes, same hash)."""
    outside.mkdir(exist_ok=True)
    shutil.copy(folder / rel, outside / Path(rel).name)
    (folder / rel).unlink()
    (folder / rel).symlink_to(outside / Path(rel).name)


@pytest.mark.parametrize("where", ["file", "folder"])
def test_the_read_itself_refuses_a_link_that_an_earlier_walk_missed(tmp_path, monkeypatch, where):
    """Each layer alone: the lstat look (``regular_file``), the O_NOFOLLOW open (``open_no_follow``), then a
    validation whose walk (``first_link``) saw nothing and a publish after a link was made: refused, never followed."""
    from unlearn_app.leaderboard import untrusted, validate
    from unlearn_app.leaderboard.publish import publish

    folder = submit(tmp_path)
    good = check_folder(folder)
    assert good.validated
    if where == "file":
        _linked(folder, ITEMS, tmp_path / "outside")
    else:  # the folder on the way is the link
        shutil.move(folder / "items", tmp_path / "outside")
        (folder / "items").symlink_to(tmp_path / "outside")
    with pytest.raises(untrusted.Unsafe, match="symbolic link"):
        untrusted.regular_file(folder, ITEMS)
    with pytest.raises(untrusted.Unsafe, match="symbolic link"):
        os.close(untrusted.open_no_follow(folder, ITEMS))
    assert untrusted.read_bytes(folder, REFERENCE) == (folder / REFERENCE).read_bytes()  # the others still read
    monkeypatch.setattr(validate.untrusted, "first_link", lambda folder: None)  # the walk misses it
    again = check_folder(folder)
    assert again.refused and "symbolic link" in again.errors[0], again.errors
    assert ITEMS not in publish(good, tmp_path / "data") and not (tmp_path / "data" / ITEMS).exists()
    assert REFERENCE in publish(good, tmp_path / "data")


def test_publish_copies_nothing_whose_hash_changed_after_validation(tmp_path):
    from unlearn_app.leaderboard.publish import publish

    folder = submit(tmp_path)
    check = check_folder(folder)
    assert check.validated
    record = json.loads((folder / "submission.json").read_text())
    record["submitter"]["notes"] = "edited after validation"  # not digested: the id still agrees
    (folder / "submission.json").write_text(json.dumps(record))
    (folder / ITEMS).write_text((folder / ITEMS).read_text() + " ")
    copied = publish(check, tmp_path / "data")
    assert "submission.json" not in copied and ITEMS not in copied
    assert sorted(copied) == sorted(set(record["files"]) - {ITEMS})
    assert not (tmp_path / "data" / "submission.json").exists() and not (tmp_path / "data" / ITEMS).exists()


# --------------------------------------------------------------------------- 4-5: names, ids
def test_a_task_name_with_a_path_is_refused_and_pictures_stay_under_out(tmp_path, capsys):
    folder = submit(tmp_path)
    folder = reseal(folder, lambda r: r["results"].__setitem__("tofu_../../../evil", r["results"][TASK]))
    refused(capsys, folder, "is not a plain name")
    assert picture_name("tofu_forget01") == "pareto_tofu_forget01.png"
    assert re.fullmatch(r"pareto_tofu_-evil-[0-9a-f]{8}\.png", picture_name("tofu_../../evil"))
    board = tmp_path / "leaderboard.json"  # an imported table may carry any task name: the picture stays in --out
    board.write_text(json.dumps({"leaderboard": [
        {"method": m, "model": m, "metrics": {"tofu_../../evil": {"forget_quality": q, "model_utility": u}}}
        for m, q, u in (("a", 0.1, 0.5), ("b", 0.3, 0.4))]}))
    site = tmp_path / "deep" / "site"
    (tmp_path / "empty").mkdir()
    assert main(["leaderboard", "build", "--from", str(tmp_path / "empty"), "--out", str(site),
                 "--import", str(board)]) == 0
    assert [p.name for p in site.glob("pareto_*.png")] == [picture_name("tofu_../../evil")]
    assert not list(tmp_path.glob("*.png")) and not list((tmp_path / "deep").glob("*.png"))
    # an existing site is not written over without --overwrite
    assert main(["leaderboard", "build", "--from", str(tmp_path / "empty"), "--out", str(site),
                 "--import", str(board)]) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_a_second_folder_with_an_existing_id_cannot_replace_the_genuine_submission(tmp_path, capsys):
    genuine = submit(tmp_path)
    copy = genuine.with_name("npo-npo-0123456789ab")
    shutil.copytree(genuine, copy)
    record = json.loads((copy / "submission.json").read_text())
    record["results"][TASK]["aggregates"]["forget_quality"] = 0.99
    (copy / "submission.json").write_text(json.dumps(record))  # still says the genuine id
    (copy / "extra.json").write_text("{}")
    assert check_folder(copy).refused and "a submission's folder is named by its id" in check_folder(copy).errors[0]
    site = tmp_path / "site"
    assert main(["leaderboard", "build", "--from", str(tmp_path / "board"), "--out", str(site)]) == 0
    assert sorted(p.name for p in (site / "submissions").iterdir()) == [f"{genuine.name}.html"]
    shown = json.loads((site / "data" / genuine.name / "submission.json").read_text())
    assert shown == json.loads((genuine / "submission.json").read_text())
    # one id in two checks (two sources): the one that validates is kept; when both or neither do, both are refused
    good, bad = Check("x-0123456789ab", "a"), Check("x-0123456789ab", "b", errors=["x: a number differs"])
    assert unique([bad, good]) == [good]
    assert [c.refused for c in unique([good, Check("x-0123456789ab", "c")])] == [True, True]


# --------------------------------------------------------------------------- 6-8: what "validated" means
def test_a_submission_without_per_item_values_is_partly_verified_and_not_drawn(tmp_path, capsys):
    folder = submit(tmp_path)

    def strip(record):
        record["results"][TASK].update(items=None, reference=None, samples=None, reference_samples=None)
        record["results"][TASK]["aggregates"] = {"forget_quality": 1.0, "model_utility": 0.99}
        record["files"], record["reference"] = {}, None

    shutil.rmtree(folder / "items")
    shutil.rmtree(folder / "reference")
    folder = reseal(folder, strip)
    check = check_folder(folder)
    assert check.ok and not check.validated and check.status == "partly verified (0 of 2)"
    capsys.readouterr()
    assert main(["leaderboard", "validate", str(folder)]) == 0
    assert capsys.readouterr().out.startswith(f"partly verified (0 of 2) {folder.name}: 0 recomputed, 2 unverified")
    site = tmp_path / "site"
    assert main(["leaderboard", "build", "--from", str(folder), "--out", str(site)]) == 0
    html = (site / "index.html").read_text()
    assert "0 validated by recomputing" in html and not list(site.glob("pareto_*.png"))
    assert len(re.findall(r'<td class="unverifiable"', html)) == 2
    # a submission's point is drawn only when both its numbers were recomputed
    rows = [Row(TASK, "m", "f", "x", {"forget_quality": 0.5, "model_utility": 0.5}, "partly verified (1 of 2)",
                "s", page="p.html", recomputed=["model_utility"])]
    assert pareto_picture(TASK, rows, tmp_path / "p.png") is None
    rows[0].recomputed.append("forget_quality")
    assert pareto_picture(TASK, rows, tmp_path / "p.png") is not None


def test_a_partly_recomputed_submission_says_so(tmp_path, capsys):
    folder = reseal(submit(tmp_path), lambda r: r["results"][TASK]["aggregates"].update(made_up_metric=0.5))
    check = check_folder(folder)
    n = check.shown - 1
    assert check.ok and check.status == f"partly verified ({n} of {n + 1})"
    assert check.unverified == {TASK: ["made_up_metric"]}


def test_a_relabelled_benchmark_is_refused(tmp_path, capsys):
    def relabel(record):
        record["results"][TASK]["benchmark"] = "MUSE"
        record["results"][TASK]["aggregates"]["forget_quality"] = 0.999

    folder = reseal(submit(tmp_path), relabel)
    refused(capsys, folder, "says benchmark MUSE, but the task is TOFU")


def _nudged(entry):
    if isinstance(entry, dict):
        return {k: _nudged(v) for k, v in entry.items()}
    return entry * (1 + 1e-9) if isinstance(entry, float) else entry


def test_a_reference_that_is_the_run_itself_is_refused(tmp_path, capsys):
    folder = submit(tmp_path)
    own = json.loads((folder / ITEMS).read_text())
    (folder / REFERENCE).write_text(json.dumps(_nudged(own)))

    def claim(record):
        record["results"][TASK]["aggregates"].update(forget_quality=1.0, privleak=0.0)

    folder = reseal(folder, claim)
    check = check_folder(folder)
    assert check.errors == [f"{check.id}: {TASK}: the reference holds the forget truth ratios of the run itself (to a "
                            "relative 1e-6): it is no distinct evaluation, so Forget Quality and PrivLeak against it "
                            "mean nothing; submit with the retain model's evaluation"]
    # the same with only the Min-K% scores copied (PrivLeak 0)
    folder = submit(tmp_path, "ga", 3)
    ref = json.loads((folder / REFERENCE).read_text())
    ref["mia_min_k"] = _nudged(json.loads((folder / ITEMS).read_text())["mia_min_k"])
    (folder / REFERENCE).write_text(json.dumps(ref))
    check = check_folder(reseal(folder))
    assert len(check.errors) == 1 and "the mia_min_k per-item scores of the run itself" in check.errors[0]
    # `unlearn submit` refuses it too
    assert main(["submit", str(tmp_path / "npo"), "--reference", str(tmp_path / "npo"), "--model-dir",
                 str(tmp_path / "npo"), "--method", "npo", "--to", str(tmp_path / "b2")]) == 2
    assert "is no distinct evaluation" in capsys.readouterr().err


def test_the_reference_digest_is_checked_and_no_local_path_is_recorded(tmp_path, capsys):
    write_tofu_run(tmp_path / "ref", REF)
    results = next((tmp_path / "ref").glob("**/results_*.json"))
    raw = json.loads(results.read_text())
    raw["config"] = {"model_args": f"pretrained={tmp_path}/models/retain-7b,dtype=float16", "model_sha": "c" * 40}
    results.write_text(json.dumps(raw))
    folder = submit(tmp_path)
    text = (folder / "submission.json").read_text()
    assert str(tmp_path) not in text
    record = json.loads(text)
    assert record["reference"] == {"source": "ref", "model": "retain-7b", "revision": "c" * 40,
                                   "sha256": files_digest({REFERENCE: record["files"][REFERENCE]})}
    assert check_folder(folder).validated
    assert main(["leaderboard", "build", "--from", str(tmp_path / "board"), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "submissions" / f"{folder.name}.html").read_text()
    assert f"ref, model retain-7b @ {'c' * 40} (sha256 {record['reference']['sha256'][:12]})" in page
    folder = reseal(folder, lambda r: r["reference"].update(sha256="0" * 64), reference_digest=False)
    assert check_folder(folder).errors == [f"{folder.name}: reference.sha256 is not the digest of the reference "
                                           f"files it holds ({REFERENCE})"]


def test_a_submission_names_no_local_folder(tmp_path):
    import yaml

    from fixtures.leaderboard import unlearn_run_folder

    write_tofu_run(tmp_path / "ref", REF)
    run = unlearn_run_folder(tmp_path / "npo", "npo", {"beta": 0.1}, tofu_records(2, 0.3), REF)
    config = yaml.safe_load((run / "unlearn_config.yaml").read_text())
    config.update(model=f"{tmp_path}/models/llama-7b", data_dir=f"{tmp_path}/data/")
    (run / "unlearn_config.yaml").write_text(yaml.safe_dump(config))
    results = next(run.glob("eval/**/results_*.json"))
    raw = json.loads(results.read_text())
    raw["configs"][TASK]["provenance"]["data"] = [{"kind": "local", "source": "tofu", "sha256": "b" * 64,
                                                    "path": f"{tmp_path}/data/forget01.json"}]
    results.write_text(json.dumps(raw))
    record = build([run], reference=tmp_path / "ref", submitter="me", notes=f"trained from {tmp_path}").record
    text = json.dumps({k: v for k, v in record.items() if k != "submitter"})
    assert str(tmp_path) not in text
    assert record["model"]["family"] == "llama-7b" and record["method"]["config"]["data_dir"] == "data"
    assert record["results"][TASK]["provenance"]["data"][0] == {"kind": "local", "source": "tofu", "sha256": "b" * 64,
                                                                "path": "forget01.json"}


# --------------------------------------------------------------------------- 10: bad input, one line, exit 2
def _raw(folder: Path, text: str | bytes) -> Path:
    (folder / "submission.json").write_bytes(text.encode() if isinstance(text, str) else text)
    return folder


@pytest.mark.parametrize("case, words", [
    ("huge aggregate", "is too large"),
    ("deep nesting", "nested too deeply"),
    ("string aggregate", "does not follow the schema"),
    ("a list", "is a JSON list, not a JSON object"),
    ("not utf-8", "is not UTF-8 text"),
    ("items not utf-8", "is not UTF-8 text"),
    ("items a list", "is a JSON list, not a JSON object"),
    ("items deep", "nested too deeply"),
])
def test_a_bad_submission_is_one_line_and_the_site_is_built_from_the_others(tmp_path, capsys, case, words):
    good = submit(tmp_path, "ga", 3)
    bad = submit(tmp_path)
    text = (bad / "submission.json").read_text()
    if case == "huge aggregate":
        _raw(bad, re.sub(r'"forget_prob": [0-9.e-]+', '"forget_prob": 1' + "0" * 400, text))
    elif case == "deep nesting":
        _raw(bad, text.replace('"notes": ""', '"notes": ' + "[" * 100_000 + "]" * 100_000))
    elif case == "string aggregate":
        _raw(bad, re.sub(r'"forget_prob": [0-9.e-]+', '"forget_prob": "0.5"', text))
    elif case == "a list":
        _raw(bad, "[1, 2]")
    elif case == "not utf-8":
        _raw(bad, b"\xff\xfe" + text.encode())
    else:
        content = {"items not utf-8": b"\xff{}", "items a list": b"[1, 2]",
                   "items deep": b"[" * 100_000 + b"]" * 100_000}[case]
        (bad / ITEMS).write_bytes(content)
        bad = reseal(bad)
    refused(capsys, bad, words)
    site = tmp_path / "site"
    assert main(["leaderboard", "build", "--from", str(tmp_path / "board"), "--out", str(site)]) == 0
    out, err = capsys.readouterr()
    assert re.search(rf"^skipped {re.escape(bad.name)}: refused: .*{re.escape(words)}", err, re.M), err
    assert "Traceback" not in out + err and "1 submission(s), 1 validated, 1 skipped" in out
    assert [p.name for p in (site / "submissions").iterdir()] == [f"{good.name}.html"]


def _import_fails(tmp_path, capsys, path, words):
    (tmp_path / "empty").mkdir(exist_ok=True)
    assert main(["leaderboard", "build", "--from", str(tmp_path / "empty"), "--out", str(tmp_path / "site"),
                 "--import", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and words in err, err


def test_bad_imports_are_one_line_errors(tmp_path, capsys):
    bad = tmp_path / "t.csv"
    bad.write_bytes("Method,Model Utility,Forget Quality\nGA,0.5,0.1\n".encode("utf-16"))
    _import_fails(tmp_path, capsys, bad, "is not UTF-8 text")
    with bad.open("w", newline="") as f:
        csv.writer(f).writerows([["Method", "Model Utility", "Forget Quality"], ["GA" * 70_000, "0.5", "0.1"]])
    _import_fails(tmp_path, capsys, bad, "cannot be read as a CSV table (field larger than field limit")
    board = tmp_path / "leaderboard.json"
    for text in ('{"leaderboard": [1, 2]}', '{"leaderboard": [{"metrics": [1]}]}',
                 '{"leaderboard": [{"method": "npo", "metrics": {"t": 1}}]}'):
        board.write_text(text)
        _import_fails(tmp_path, capsys, board, "is no `unlearn sweep` leaderboard.json")
    board.write_text('{"leaderboard": [{"method": "npo", "metr')
    _import_fails(tmp_path, capsys, board, "is not valid JSON")
    ou = tmp_path / "ou_forget01"
    ou.mkdir()
    (ou / "TOFU_EVAL.json").write_text("[")
    _import_fails(tmp_path, capsys, ou, "is not valid JSON")


def test_offline_hub_and_submit_to_a_file_are_one_line_errors(tmp_path, capsys, monkeypatch):
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    assert main(["leaderboard", "validate", "a/b"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the Hub cannot be reached" in err
    write_tofu_run(tmp_path / "ref", REF)
    write_tofu_run(tmp_path / "npo", tofu_records(2, 0.3), REF)
    target = tmp_path / "a-file"
    target.write_text("keep me")
    assert main(["submit", str(tmp_path / "npo"), "--reference", str(tmp_path / "ref"), "--model-dir",
                 str(tmp_path / "npo"), "--method", "npo", "--to", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file; --to takes a leaderboard folder" in err
    assert target.read_text() == "keep me"


# --------------------------------------------------------------------------- 11: rebuilding
def test_a_rebuild_removes_what_it_wrote_for_a_submission_no_longer_there_and_nothing_else(tmp_path, capsys):
    one, two = submit(tmp_path, "npo", 2), submit(tmp_path, "ga", 3)
    site = tmp_path / "site"
    assert main(["leaderboard", "build", "--from", str(tmp_path / "board"), "--out", str(site)]) == 0
    assert (site / "submissions" / f"{two.name}.html").is_file() and (site / "data" / two.name / ITEMS).is_file()
    (site / "CNAME").write_text("board.example.org")  # the site owner's own files
    (site / "data" / "mine.json").write_text("{}")
    shutil.rmtree(two)
    assert main(["leaderboard", "build", "--from", str(tmp_path / "board"), "--out", str(site)]) == 2  # no --overwrite
    assert main(["leaderboard", "build", "--from", str(tmp_path / "board"), "--out", str(site), "--overwrite"]) == 0
    assert "file(s) of an earlier build removed" in capsys.readouterr().out
    assert not (site / "submissions" / f"{two.name}.html").exists() and not (site / "data" / two.name).exists()
    assert (site / "submissions" / f"{one.name}.html").is_file()
    assert (site / "CNAME").read_text() == "board.example.org" and (site / "data" / "mine.json").is_file()
    assert json.loads((site / MANIFEST).read_text()) == sorted(
        p.relative_to(site).as_posix() for p in site.rglob("*")
        if p.is_file() and p.name not in ("CNAME", "mine.json", MANIFEST))
    # --out may not be a submission folder (or hold one)
    assert main(["leaderboard", "build", "--from", str(tmp_path / "ref"), "--out", str(one), "--overwrite"]) == 2
    assert "is a submission folder" in capsys.readouterr().err


# --------------------------------------------------------------------------- the site in a browser
PWN = "document.body.setAttribute('data-pwned', '1')"
HOSTILE = f"\"'><img src=x onerror=\"{PWN}\"><script>{PWN}</script>"


def test_a_hostile_board_gives_a_site_that_runs_no_injected_script_and_holds_nothing_from_outside(tmp_path, capsys):
    """Hostile names in every free-text field, an extra HTML file, links to a secret file and to /etc, a listed
    HTML file, a linked submission folder and an imported table with a hostile task: headless Chromium loads every
    page and no injected script runs; every file of the site is one the builder wrote or a listed, hash-checked file."""
    from test_html_report import browser

    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-OF-THE-BUILDER")
    write_tofu_run(tmp_path / "ref", REF)
    run = tmp_path / "<img src=x onerror=document.body.dataset.pwned=1>"
    write_tofu_run(run, tofu_records(2, 0.3), REF)
    folder = save_local(build([run], reference=tmp_path / "ref", model_dir=run, method=HOSTILE, family=HOSTILE,
                              hyperparameters={HOSTILE: HOSTILE}, submitter=HOSTILE, notes=HOSTILE), tmp_path / "board")
    (folder / "evil.html").write_text(f"<script>{PWN}</script>")
    linked = submit(tmp_path, "rmu", 4)
    (linked / "leak.json").symlink_to(secret)
    (linked / "etc").symlink_to("/etc")
    listed = submit(tmp_path, "ga", 3)
    (listed / "evil.html").write_text(f"<script>{PWN}</script>")
    reseal(listed, lambda r: r["files"].update({"evil.html": ""}))  # listed, with its hash
    outside = tmp_path / "outside" / "npo-npo-fedcba987654"
    shutil.copytree(folder, outside)
    (tmp_path / "board" / "submissions" / outside.name).symlink_to(outside)
    board = tmp_path / "leaderboard.json"
    board.write_text(json.dumps({"leaderboard": [{"method": HOSTILE, "model": HOSTILE, "values": {HOSTILE: HOSTILE},
                                                  "metrics": {f"tofu_{HOSTILE}": {"forget_quality": 0.2,
                                                                                   "model_utility": 0.4}}}]}))
    site = tmp_path / "site"
    assert main(["leaderboard", "build", "--from", str(tmp_path / "board"), "--out", str(site),
                 "--import", str(board)]) == 0
    err = capsys.readouterr().err
    assert err.count("skipped ") == 3 and err.count("symbolic link") == 2 and "evil.html" in err

    checks = {c.id: c for c in (check_folder(p) for p in (tmp_path / "board" / "submissions").iterdir())}
    shown = [c for c in checks.values() if not c.refused]
    allowed = {"index.html", MANIFEST, *(p.name for p in site.glob("pareto_*.png"))}
    for c in shown:
        allowed.add(f"submissions/{c.id}.html")
        for rel in ["submission.json", *c.record["files"]]:
            allowed.add(f"data/{c.id}/{rel}")
            assert (site / "data" / c.id / rel).read_bytes() == (Path(c.folder) / rel).read_bytes()
    files = {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file() or p.is_symlink()}
    assert files == allowed and not any(p.is_symlink() for p in site.rglob("*"))
    assert not any(b"SECRET-OF-THE-BUILDER" in (site / f).read_bytes() for f in files)
    assert not any(f.endswith(".html") and f.startswith("data/") for f in files)
    assert len(shown) == 1 and len(list(site.glob("pareto_*.png"))) == 2

    pages = [site / "index.html", *(site / "submissions").glob("*.html")]
    assert len(pages) == 2
    for page in pages:
        proc = browser("--dump-dom", page.as_uri())
        assert proc.returncode == 0 and "</body>" in proc.stdout, proc.stderr[-2000:]
        assert not re.search(r"<body[^>]*data-pwned", proc.stdout), page.name  # no injected script ran
        assert "<script>document.body" not in proc.stdout  # the hostile text is text, not markup
        assert "onerror=" in proc.stdout.replace("&quot;", '"')  # ... and shown as such
