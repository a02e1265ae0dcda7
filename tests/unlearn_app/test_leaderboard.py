"""The leaderboard: submissions made from `unlearn run` folders and lm-eval / open-unlearning runs go through `unlearn
submit` into the Hub stand-in (a broken upload resumed, a duplicate refused); `unlearn leaderboard validate`
recomputes every number and names the tampered one; `unlearn leaderboard build` writes a site that headless Chromium
loads with sortable tables, the Pareto picture and per-submission pages; the TOFU and MUSE leaderboard CSVs import."""

import csv
import importlib.metadata
import json
import re
from pathlib import Path

import pytest

from fixtures.leaderboard import TASK, tofu_records, unlearn_run_folder, write_tofu_run
from unlearn_app.cli import main
from unlearn_app.leaderboard.importers import import_table
from unlearn_app.leaderboard.submission import build, schema_errors
from unlearn_app.leaderboard.validate import check_folder
from unlearn_app.open_unlearning.writer import export_run
from unlearn_tasks.metrics.tofu import forget_quality, model_utility

REF = tofu_records(1)


@pytest.fixture
def online(monkeypatch, hub_standin):
    import huggingface_hub.constants as hc

    hub = hub_standin()
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hc, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    return hub


@pytest.fixture
def runs(tmp_path):
    """The retain run, two `unlearn run` folders (one with a tampered forget_prob) and an open-unlearning folder."""
    write_tofu_run(tmp_path / "ref", REF)
    npo = unlearn_run_folder(tmp_path / "npo", "npo", {"beta": 0.1}, tofu_records(2, 0.3), REF)
    ga = unlearn_run_folder(tmp_path / "ga", "ga", {"lr": 1e-5}, tofu_records(3, 0.6), REF, tamper={"forget_prob": 0.5})
    simnpo = write_tofu_run(tmp_path / "simnpo_run" / "forget01", tofu_records(4, 0.2), REF)
    export_run(simnpo, tmp_path / "ou_forget01")  # open-unlearning's TOFU_EVAL.json / TOFU_SUMMARY.json
    return {"ref": tmp_path / "ref", "npo": npo, "ga": ga, "ou": tmp_path / "ou_forget01"}


def test_a_submission_records_its_model_method_items_and_reference(runs):
    built = build([runs["npo"]], reference=runs["ref"], submitter="me", notes="tiny model", date="2026-11-26T20:00:00+00:00")
    r = built.record
    assert schema_errors(r) == []
    assert r["method"] == {"name": "npo", "hyperparameters": {"beta": 0.1}, "config": r["method"]["config"]}
    assert r["method"]["config"]["forget"] == "forget01" and r["model"]["family"] == "tiny-llama"
    assert re.fullmatch(r"[0-9a-f]{64}", r["model"]["local_sha256"]) and r["model"]["hub_id"] is None
    entry = r["results"][TASK]
    assert entry["items"] == f"items/{TASK}/TOFU_EVAL.json" and entry["reference"] == f"reference/{TASK}/TOFU_EVAL.json"
    assert entry["version"] == 1.0 and r["packages"]["lm_eval"]
    items = json.loads(built.files[entry["items"]])
    assert len(items["forget_truth_ratio"]["value_by_index"]) == 6
    # the same content gives the same id, whatever the date and the text
    again = build([runs["npo"]], reference=runs["ref"], submitter="someone else", date="2027-01-01T00:00:00+00:00")
    assert again.id == built.id and again.id.startswith("npo-npo-")
    # hand-computed: Forget Quality is the KS p-value of the forget truth ratios against the reference's
    forget = [x["truth_ratio"] for x in tofu_records(2, 0.3) if x["split"] == "forget"]
    assert entry["aggregates"]["forget_quality"] == pytest.approx(
        forget_quality(forget, [x["truth_ratio"] for x in REF if x["split"] == "forget"]), rel=1e-12)


def test_validation_recomputes_every_number_and_names_the_tampered_one(runs, tmp_path):
    from unlearn_app.leaderboard.store import save_local

    good = check_folder(save_local(build([runs["npo"]], reference=runs["ref"]), tmp_path / "b"))
    assert good.ok and good.unverified == {}
    assert {"forget_quality", "model_utility", "privleak", "forget_prob", "forget_truth_ratio", "mia_min_k_auc"} <= set(
        good.recomputed[TASK])
    # Model Utility by hand: the harmonic mean of the 9 retain / real-authors / world-facts numbers
    recs = tofu_records(2, 0.3)
    parts = []
    for s in ("retain", "ra", "wf"):
        rows = [x for x in recs if x["split"] == s]
        parts += [sum(x["prob"] for x in rows) / len(rows), sum(x["rougeL_recall"] for x in rows) / len(rows),
                  sum(max(0.0, 1 - x["truth_ratio"]) for x in rows) / len(rows)]
    assert good.recomputed[TASK]["model_utility"] == pytest.approx(model_utility(parts), rel=1e-9)

    bad = check_folder(save_local(build([runs["ga"]], reference=runs["ref"]), tmp_path / "b"))
    true_prob = sum(x["prob"] for x in tofu_records(3, 0.6) if x["split"] == "forget") / 6
    assert bad.errors == [f"{bad.id}: {TASK}/forget_prob = 0.5 submitted, but {true_prob:.6g} recomputed from its "
                          "per-item values"]
    # an edited per-item file, and an edited number in submission.json, are caught by the hashes
    folder = tmp_path / "b" / "submissions" / good.id
    record = json.loads((folder / "submission.json").read_text())
    record["results"][TASK]["aggregates"]["model_utility"] = 0.99
    (folder / "submission.json").write_text(json.dumps(record))
    (folder / "items" / TASK / "TOFU_EVAL.json").write_text("{}")
    errors = check_folder(folder).errors
    assert any("the id's digest is not that of the content" in e for e in errors)
    assert any(f"items/{TASK}/TOFU_EVAL.json has sha256" in e for e in errors)


def test_without_a_reference_forget_quality_is_unverified_not_refused(runs, tmp_path):
    from unlearn_app.leaderboard.store import save_local

    check = check_folder(save_local(build([runs["npo"]]), tmp_path / "b"))
    assert check.ok and check.unverified == {TASK: ["forget_quality", "privleak"]}


def test_three_submissions_through_the_hub_standin_validate_and_build(runs, online, tmp_path, capsys, monkeypatch):
    ref = ["--reference", str(runs["ref"])]
    assert main(["submit", str(runs["npo"]), *ref, "--repo", "board/unlearning", "--submitter", "me"]) == 0
    # the tampered run is refused locally; --allow-mismatch uploads it anyway (the board still refuses it)
    assert main(["submit", str(runs["ga"]), *ref, "--repo", "board/unlearning"]) == 1
    assert "forget_prob = 0.5 submitted" in capsys.readouterr().err
    assert main(["submit", str(runs["ga"]), *ref, "--repo", "board/unlearning", "--allow-mismatch"]) == 0
    # a broken upload: nothing committed; the same command again resumes it
    import unlearn_app.leaderboard.store as store

    monkeypatch.setattr(store.time, "sleep", lambda s: None)  # no back-off between the retries
    online.fail_creates = 99
    ou = ["submit", str(runs["ou"]), *ref, "--model-id", "me/simnpo", "--revision", "a" * 40, "--method", "simnpo",
          "--repo", "board/unlearning"]
    assert main(ou) == 2
    assert "nothing was committed: run the same command again to resume" in capsys.readouterr().err
    assert len(online.repos["board/unlearning"]["commits"]) == 2
    online.fail_creates = 0
    assert main(ou) == 0
    repo = online.repos["board/unlearning"]
    assert len(repo["commits"]) == 3 and sorted({f.split("/")[1] for f in repo["files"]}) == sorted(
        f.split("/")[1] for f in repo["files"] if f.endswith("/submission.json"))  # one folder per submission
    assert main(ou) == 2  # a duplicate is refused
    assert "already holds the submission" in capsys.readouterr().err
    assert len(online.repos["board/unlearning"]["commits"]) == 3

    capsys.readouterr()
    assert main(["leaderboard", "validate", "board/unlearning"]) == 1
    out = capsys.readouterr().out
    assert len(re.findall(r"^validated ", out, re.M)) == 2 and len(re.findall(r"^FAIL ga-ga-", out, re.M)) == 1
    assert f"{TASK}/forget_prob = 0.5 submitted" in out

    tofu_csv, muse_csv = _leaderboard_csvs(tmp_path)
    site = tmp_path / "site"
    assert main(["leaderboard", "build", "--from", "board/unlearning", "--out", str(site),
                 "--import", str(tofu_csv), "--import", str(muse_csv)]) == 0
    _browse(site, tmp_path)


def _leaderboard_csvs(tmp_path):
    tofu = tmp_path / "llama2-7b_forget01.csv"
    with tofu.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Method", "Submitted By", "Epoch", "Model Utility", "Forget Quality", "ROUGE Real Authors"])
        w.writerow(["Grad Ascent", "TOFU authors", "5", "0.52", "0.0068", "0.41"])
        w.writerow(["KL", "TOFU authors", "5", "0.55", "0.0043", "0.44"])
    muse = tmp_path / "muse_leaderboard.csv"
    with muse.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Method", "Model", "Corpus", "VerbMem Forget", "KnowMem Forget", "KnowMem Retain", "PrivLeak"])
        w.writerow(["NPO", "llama2-7b", "News", "0.0", "0.0", "0.0", "-100.0"])
        w.writerow(["Target", "llama2-7b", "News", "58.4", "63.9", "55.2", "-99.8"])
    return tofu, muse


def test_the_tofu_and_muse_leaderboard_csvs_import(tmp_path):
    tofu, muse = _leaderboard_csvs(tmp_path)
    rows = import_table(tofu)
    assert [(r.task, r.family, r.method, r.submitter, r.status) for r in rows] == [
        ("tofu_forget01", "llama2-7b", "Grad Ascent (epoch 5)", "TOFU authors", "unverifiable"),
        ("tofu_forget01", "llama2-7b", "KL (epoch 5)", "TOFU authors", "unverifiable")]
    assert rows[0].metrics == {"model_utility": 0.52, "forget_quality": 0.0068, "ra_rougeL_recall": 0.41}
    rows = import_table(muse)
    assert rows[1].task == "muse_news" and rows[1].method == "Target" and rows[1].status == "unverifiable"
    assert rows[1].metrics == pytest.approx({"forget_verbmem": 0.584, "forget_knowmem": 0.639, "retain_knowmem": 0.552,
                                             "privleak": -99.8})
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    assert main(["leaderboard", "build", "--from", str(tmp_path), "--out", str(tmp_path / "s"), "--import", str(bad)]) == 2


def test_open_unlearning_folders_and_sweep_leaderboards_import(runs, tmp_path):
    [row] = import_table(runs["ou"])
    assert row.status == "recomputed" and row.task == TASK and "forget_prob" in row.metrics
    board = tmp_path / "leaderboard.json"
    board.write_text(json.dumps({"leaderboard": [{"method": "npo", "values": {"beta": 0.1}, "model": "tiny",
                                                  "metrics": {TASK: {"forget_quality": 0.3, "model_utility": 0.5}}}]}))
    [row] = import_table(board)
    assert (row.method, row.status, row.metrics) == ("npo (beta=0.1)", "unverifiable",
                                                     {"forget_quality": 0.3, "model_utility": 0.5})


def test_bad_input_is_a_one_line_error(tmp_path, capsys):
    assert main(["leaderboard", "validate", str(tmp_path / "nope")]) == 2
    assert "neither a folder nor a Hub dataset id" in capsys.readouterr().err
    assert main(["leaderboard", "validate", str(tmp_path)]) == 2
    assert "holds no submission" in capsys.readouterr().err
    assert main(["submit", str(tmp_path / "nope"), "--to", str(tmp_path / "b")]) == 2
    assert "does not exist" in capsys.readouterr().err
    run = tmp_path / "run"
    run.mkdir()
    assert main(["submit", str(run), "--to", str(tmp_path / "b"), "--repo", "a/b"]) == 2
    assert "give one destination" in capsys.readouterr().err


def _browse(site: Path, tmp_path: Path) -> None:
    """Headless Chromium: the index loads without console errors, a click on a column sorts its table, every link
    and image resolves, and a submission's page shows its provenance."""
    from test_html_report import browser

    index = site / "index.html"
    html = index.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)  # nothing fetched from elsewhere
    for link in re.findall(r'(?:href|src)="([^"#]+)"', html):
        assert (site / link).is_file(), link
    cell = re.findall(r'<td class="failed"[^>]*data-value="([^"]*)"', html)
    assert cell == ["0.5"]  # the tampered number, and only it, marked on the board
    pages = sorted((site / "submissions").glob("*.html"))
    assert len(pages) == 3
    for page in pages:
        for link in re.findall(r'href="([^"#]+)"', page.read_text()):
            assert (page.parent / link).resolve().is_file(), (page.name, link)
    probe = site / "probe.html"
    catch = ("<script>window.__errs = []; window.addEventListener('error', e => __errs.push(e.message));"
             "const ce = console.error; console.error = (...a) => { __errs.push(a.join(' ')); ce(...a); };</script>")
    probe.write_text(html.replace("<style>", catch + "<style>", 1).replace("</body>", """<script>
window.addEventListener('load', () => {
const t = document.getElementById('table-tofu_forget01');
const col = Array.from(t.tHead.rows[0].cells).findIndex(c => c.textContent === 'model_utility');
t.tHead.rows[0].cells[col].click();
const asc = Array.from(t.tBodies[0].rows).map(r => r.cells[col].dataset.value).join('|');
t.tHead.rows[0].cells[col].click();
const desc = Array.from(t.tBodies[0].rows).map(r => r.cells[col].dataset.value).join('|');
document.getElementById('method').value = 'npo'; document.getElementById('method').dispatchEvent(new Event('change'));
const shown = Array.from(t.tBodies[0].rows).filter(r => !r.hidden).length;
document.body.setAttribute('data-probe', JSON.stringify({asc, desc, shown, errors: window.__errs,
  images: Array.from(document.images).map(i => i.naturalWidth)}));
});
</script></body>"""))
    proc = browser("--enable-logging=stderr", "--v=0", "--dump-dom", probe.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Uncaught" not in proc.stderr, proc.stderr[-2000:]
    probe_data = json.loads(re.search(r"data-probe=\"([^\"]*)\"", proc.stdout).group(1).replace("&quot;", '"'))
    asc = [float(v) for v in probe_data["asc"].split("|") if v]
    desc = [float(v) for v in probe_data["desc"].split("|") if v]
    assert probe_data["errors"] == []
    assert len(asc) == 5 and asc == sorted(asc) and desc == sorted(desc, reverse=True)
    assert probe_data["shown"] == 1 and len(probe_data["images"]) == 2 and all(w > 300 for w in probe_data["images"])
    page = next(p for p in pages if p.name.startswith("npo-npo-"))
    proc = browser("--dump-dom", page.as_uri())
    assert "validated: every number recomputed" in proc.stdout and "beta=0.1" in proc.stdout
    assert "recomputed" in proc.stdout and "TOFU_EVAL.json" in proc.stdout


@pytest.mark.slow
def test_unlearn_run_and_lm_eval_on_the_tiny_model_submit_and_validate(tmp_path, tiny_model_dir, demo_data_dir, capsys):
    """The real thing: `unlearn run` trains the tiny model, lm-eval evaluates it and the (untouched) retain stand-in
    with --log_samples, `unlearn submit` stores it, `unlearn leaderboard validate` recomputes every number."""
    from harness_ext.evaluate import run_lm_eval

    task = "tofu_forget01_likelihood"

    def evaluate(model, out, metadata):  # with the samples file `lm_eval --log_samples` writes beside the results
        run_lm_eval(str(model), [task], out, metadata, batch_size=8, log_samples=True)

    ckpt = tmp_path / "ga"
    assert main(["run", "--method", "ga", "--model", str(tiny_model_dir), "--out", str(ckpt), "--data-dir",
                 str(demo_data_dir), "--forget", "forget01", "--epochs", "1", "--batch-size", "8", "--lr", "1e-3",
                 "--merge", "--quiet"]) == 0
    evaluate(tiny_model_dir, tmp_path / "retain", {"data_dir": str(demo_data_dir)})
    evaluate(ckpt, tmp_path / "eval_ga", {"data_dir": str(demo_data_dir), "reference": str(tmp_path / "retain")})
    assert main(["submit", str(ckpt), str(tmp_path / "eval_ga"), "--reference", str(tmp_path / "retain"),
                 "--to", str(tmp_path / "board")]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "validate", str(tmp_path / "board")]) == 0
    [folder] = (tmp_path / "board" / "submissions").iterdir()
    check = check_folder(folder)
    assert check.record["method"]["name"] == "ga" and check.record["model"]["local_sha256"]
    assert {"forget_quality", "privleak", "forget_prob", "forget_truth_ratio", "mia_min_k_auc"} <= set(
        check.recomputed[task])
    entry = check.record["results"][task]  # lm-eval's samples file travels with it, with the versions behind it
    assert entry["samples"] == f"samples/{task}.jsonl" and entry["reference_samples"]
    assert check.unverified == {}  # mia_reference_auc too: from the run's and the reference's per-item losses
    assert entry["produced_by"]["lm_eval"] == importlib.metadata.version("lm_eval") and entry["produced_by"]["git_commit"]


def test_a_muse_submission_is_recomputed_and_other_tasks_are_unverified(tmp_path):
    from fixtures.leaderboard import muse_metrics, muse_records, write_muse_run
    from unlearn_app.leaderboard.store import save_local

    ref = muse_records(10)
    write_muse_run(tmp_path / "ref", ref)
    write_muse_run(tmp_path / "npo", muse_records(11, 0.5), ref, extra={"hellaswag": {"acc": 0.25}})
    check = check_folder(save_local(build([tmp_path / "npo"], reference=tmp_path / "ref", model_dir=tmp_path / "npo",
                                          method="npo"), tmp_path / "b"))
    assert check.ok and check.unverified == {"hellaswag": ["acc"]}
    expected = muse_metrics(muse_records(11, 0.5), ref)
    assert check.recomputed["muse_news"] == pytest.approx(expected, rel=1e-9)
    write_muse_run(tmp_path / "bad", muse_records(11, 0.5), ref, tamper={"privleak": 12.5})
    bad = check_folder(save_local(build([tmp_path / "bad"], reference=tmp_path / "ref", model_dir=tmp_path / "bad",
                                        method="npo"), tmp_path / "b"))
    assert bad.errors == [f"{bad.id}: muse_news/privleak = 12.5 submitted, but {expected['privleak']:.6g} recomputed "
                          "from its per-item values and the reference"]


def _page_command(start: str) -> list[str]:
    """The command of docs/leaderboard.md that starts with ``start``, its continuation lines joined, as argv."""
    import shlex

    page = (Path(__file__).parents[2] / "docs" / "leaderboard.md").read_text()
    lines = page.splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip().startswith(start))
    text = ""
    for line in lines[first:]:
        text += line.strip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            break
    return shlex.split(text)


def test_the_pages_steps_give_a_full_row_with_forget_quality_privleak_and_the_picture(tmp_path, capsys, monkeypatch):
    """docs/leaderboard.md's steps: two runs evaluated with --log_samples and no reference (their results have no
    Forget Quality or PrivLeak), then the page's own `unlearn submit ... --reference runs/retain` (into a folder
    instead of the Hub) and `unlearn leaderboard build`: the row has both numbers, recomputed, and the picture."""
    from unlearn_app.leaderboard.validate import check_folder

    monkeypatch.chdir(tmp_path)
    npo = write_tofu_run(Path("runs/npo"), tofu_records(2, 0.3))  # as lm_eval --output_path runs/npo writes it
    write_tofu_run(Path("runs/retain"), REF)
    assert json.loads(npo.read_text())["results"][TASK].get("forget_quality,none") is None
    argv = _page_command("unlearn submit runs/npo --reference runs/retain")
    at = argv.index("--repo")
    argv[at:at + 2] = ["--to", "board"]
    argv[argv.index("--revision") + 1] = "a" * 40  # the page's placeholder SHA
    capsys.readouterr()
    assert main(argv[1:]) == 0
    out, err = capsys.readouterr()
    assert f"computed against --reference retain (the run was evaluated without one): {TASK} (forget_quality, " \
           "privleak)" in err and ": validated;" in out
    [folder] = Path("board/submissions").iterdir()
    aggregates = json.loads((folder / "submission.json").read_text())["results"][TASK]["aggregates"]
    forget = [x["truth_ratio"] for x in tofu_records(2, 0.3) if x["split"] == "forget"]
    assert aggregates["forget_quality"] == pytest.approx(
        forget_quality(forget, [x["truth_ratio"] for x in REF if x["split"] == "forget"]), rel=1e-12)
    check = check_folder(folder)
    assert check.validated and {"forget_quality", "privleak", "model_utility"} <= set(check.recomputed[TASK])
    assert main(["leaderboard", "build", "--from", "board", "--out", "site"]) == 0
    assert Path(f"site/pareto_{TASK}.png").is_file()
    html = Path("site/index.html").read_text()
    assert re.search(r"<th[^>]*>forget_quality</th>", html) and re.search(r"<th[^>]*>privleak</th>", html)
    assert f'<td class="recomputed" title="recomputed from the per-item values" data-value="{aggregates["privleak"]}"' \
        in html
