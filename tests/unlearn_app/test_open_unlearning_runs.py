"""Issue 26, item 6: open-unlearning evaluation folders as runs in `unlearn report` (Markdown, --json, --html) and
`unlearn ci --from-results`, with Forget Quality, Model Utility and PrivLeak recomputed from OU's per-item values
and disagreeing OU values reported. Expected values are hand-computed in ``fixtures/open_unlearning.py``."""

import json

import pytest

from fixtures.commands import run_command
from fixtures.open_unlearning import (
    FORGET_TR,
    FORGET_TR_STAT,
    FQ_SEPARATED,
    MIN_K_AUC,
    MODEL_UTILITY,
    PRIVLEAK_VS_REFERENCE,
    REF_MIN_K_AUC,
    REFERENCE_TR,
    by_index,
    mia_entry,
    reference_logs,
    tofu_logs,
    write_ou,
)
from fixtures.runs import write_results
from unlearn_app.cli import main
from unlearn_app.open_unlearning.reader import read_ou_folder


def _report_json(tmp_path, *args):
    out = tmp_path / "report.json"
    assert main(["report", *map(str, args), "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_ou_folder_is_a_run_with_our_metric_names(tmp_path, capsys):
    ou = write_ou(tmp_path / "saves" / "eval" / "tofu_forget01_npo", tofu_logs())
    ours = write_results(tmp_path / "ours", {"tofu_forget01": {"forget_quality": 0.2, "model_utility": 0.5}})
    data = _report_json(tmp_path, ou, ours.parent.parent)
    m = data["tofu_forget01_npo"]["tofu_forget01"]
    assert m["forget_truth_ratio"] == pytest.approx(FORGET_TR_STAT)
    assert m["forget_prob"] == pytest.approx(0.75) and m["forget_rougeL_recall"] == pytest.approx(0.75)
    assert m["model_utility"] == pytest.approx(MODEL_UTILITY)  # recomputed from the 9 parts' per-item values
    assert m["mia_min_k_auc"] == pytest.approx(MIN_K_AUC)
    assert m["extraction_strength"] == pytest.approx(0.5)
    # no reference: OU's own Forget Quality and PrivLeak (against its retain_logs_path) are shown as they are
    assert m["forget_quality"] == pytest.approx(0.03) and m["privleak"] == pytest.approx(-50.0)
    assert data["ours"]["tofu_forget01"] == {"forget_quality": 0.2, "model_utility": 0.5}
    out = capsys.readouterr()
    assert "| Model Utility | 0.4500 | 0.5000 |" in out.out
    assert "open-unlearning" in out.out  # provenance row names the evaluator
    assert " in TOFU_" not in out.out  # every value in OU's files agrees with its recomputation
    # ... and the two values that cannot be recomputed without a reference are marked as OU's own
    assert "tofu_forget01/forget_quality: not recomputed (no reference given" in out.out
    assert "tofu_forget01/privleak: not recomputed (no reference given" in out.out


def test_reference_of_either_kind_recomputes_forget_quality_and_privleak(tmp_path, capsys):
    ou = write_ou(tmp_path / "tofu_forget01_npo", tofu_logs())
    ref_ou = write_ou(tmp_path / "tofu_forget01_retain", reference_logs())
    ref_ours = write_results(tmp_path / "ref_ours", {"tofu_forget01": {"forget_quality": 1.0}})
    raw = json.loads(ref_ours.read_text())
    raw["configs"]["tofu_forget01"]["unlearning_reference"] = {
        "format": "lm-eval-unlearning/tofu-reference/1", "forget_split": "forget01", "n_forget": 4,
        "forget_truth_ratio": REFERENCE_TR, "mia_auc": {"mia_min_k_auc": REF_MIN_K_AUC}}
    ref_ours.write_text(json.dumps(raw))
    for i, ref in enumerate((ref_ou, ref_ours.parent.parent)):
        out = tmp_path / f"r{i}.json"
        assert main(["report", str(ou), "--reference", str(ref), "--json", str(out)]) == 0
        m = json.loads(out.read_text())["tofu_forget01_npo"]["tofu_forget01"]
        assert m["forget_quality"] == pytest.approx(FQ_SEPARATED)
        assert m["privleak"] == pytest.approx(PRIVLEAK_VS_REFERENCE)
        assert m["model_utility"] == pytest.approx(MODEL_UTILITY)
        printed = capsys.readouterr()
        # OU's summary values (0.03, -50) disagree with the recomputation: reported, with both numbers
        assert "forget_quality = 0.03 in TOFU_SUMMARY.json, but 0.0285714" in printed.err
        assert "privleak = -50 in TOFU_SUMMARY.json, but -66.6667" in printed.err
        assert "disagree with their recomputation" in printed.out


def test_a_summary_value_that_disagrees_with_its_items_is_reported_and_the_recomputation_shown(tmp_path, capsys):
    logs = tofu_logs()
    summary = {"forget_truth_ratio": 0.3, "model_utility": 0.6, "forget_Q_A_Prob": 0.75}
    ou = write_ou(tmp_path / "tofu_forget01_x", logs, summary=summary)
    html = tmp_path / "r.html"
    data = _report_json(tmp_path, ou, "--html", html)
    m = data["tofu_forget01_x"]["tofu_forget01"]
    assert m["model_utility"] == pytest.approx(MODEL_UTILITY) and m["forget_truth_ratio"] == pytest.approx(FORGET_TR_STAT)
    err = capsys.readouterr().err
    assert "model_utility = 0.6 in TOFU_SUMMARY.json, but 0.45 recomputed" in err
    assert "forget_truth_ratio = 0.3 in TOFU_SUMMARY.json, but 0.2625 recomputed" in err
    assert "forget_Q_A_Prob" not in err  # agrees
    page = html.read_text()
    assert 'id="notes"' in page and "model_utility = 0.6 in TOFU_SUMMARY.json" in page


def test_prob_mean_truth_ratios_are_recognised_and_forget_quality_is_unchanged(tmp_path):
    """OU's prob_mean aggregation stores p_c / (p_c + p_w) = 1 / (1 + R) per item and their plain mean."""
    items = [1 / (1 + r) for r in FORGET_TR]
    logs = tofu_logs(items, sum(items) / 4, ratios=FORGET_TR)
    ou = write_ou(tmp_path / "tofu_forget01_pm", logs)
    write_ou(tmp_path / "ref" / "tofu_forget01_retain", reference_logs())
    [task] = read_ou_folder(ou, str(tmp_path / "ref" / "tofu_forget01_retain"))
    assert task.modes == {"forget_truth_ratio": "prob_mean"}
    assert task.metrics["forget_truth_ratio"] == pytest.approx((1 / 1.1 + 1 / 1.2 + 0.8 + 2 / 3) / 4)
    assert task.metrics["forget_quality"] == pytest.approx(FQ_SEPARATED)


def test_muse_folder_maps_to_the_muse_task_of_its_corpus(tmp_path):
    rouge = lambda v: {"agg_value": sum(v) / len(v), "value_by_index": {  # noqa: E731
        str(i): {"rougeL_f1": x, "rougeL_recall": 1.0} for i, x in enumerate(v)}}
    logs = {"forget_verbmem_ROUGE": rouge([0.2, 0.4]), "forget_knowmem_ROUGE": rouge([0.1, 0.3]),
            "retain_knowmem_ROUGE": rouge([0.5, 0.7]), "mia_min_k": mia_entry([1.0, 2.0, 3.0, 6.0], [4.0, 5.0, 7.0, 8.0], 0.875),
            "privleak": {"agg_value": -75.0}, "extraction_strength": {"agg_value": 0.4, "value_by_index": by_index([0.3, 0.5])}}
    ou = write_ou(tmp_path / "muse_News_target", logs, "MUSE", {k: v["agg_value"] for k, v in logs.items()})
    [task] = read_ou_folder(ou)
    assert task.task == "muse_news"
    assert task.metrics["forget_verbmem"] == pytest.approx(0.3) and task.metrics["forget_knowmem"] == pytest.approx(0.2)
    assert task.metrics["retain_knowmem"] == pytest.approx(0.6) and task.metrics["mia_min_k_auc"] == pytest.approx(0.875)
    assert task.metrics["privleak"] == -75.0 and task.metrics["extraction_strength"] == pytest.approx(0.4)
    ref = write_ou(tmp_path / "muse_News_retrain", {"mia_min_k": mia_entry([1.0, 3.0, 5.0, 7.0], [2.0, 4.0, 6.0, 8.0], 0.625)},
                   "MUSE", {})
    [task] = read_ou_folder(ou, str(ref))
    assert task.metrics["privleak"] == pytest.approx(PRIVLEAK_VS_REFERENCE)
    assert any("privleak = -75 in MUSE_SUMMARY.json" in n for n in task.notes)


def test_ci_from_results_reads_an_ou_folder_and_report_reads_the_ci_folder(tmp_path, capsys):
    ou = write_ou(tmp_path / "tofu_forget01_npo", tofu_logs())
    ref = write_ou(tmp_path / "tofu_forget01_retain", reference_logs())
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"tasks: [tofu_forget01]\nreference: {ref}\nchecks:\n  - tofu_forget01/model_utility >= 0.4\n"
                     "  - tofu_forget01/forget_quality >= 0.05\n")
    out = tmp_path / "ci"
    assert main(["ci", "--suite", str(suite), "--from-results", str(ou), "--out", str(out)]) == 1
    record = json.loads((out / "results.json").read_text())
    assert [c["passed"] for c in record["checks"]] == [True, False]
    assert record["checks"][1]["value"] == pytest.approx(FQ_SEPARATED)
    assert record["provenance"]["tasks"]["tofu_forget01"]["package"] == "open-unlearning"
    capsys.readouterr()
    data = _report_json(tmp_path, out)
    assert data["ci"]["tofu_forget01"]["forget_quality"] == pytest.approx(FQ_SEPARATED)
    assert "forget_quality = 0.03 in TOFU_SUMMARY.json" in capsys.readouterr().err  # the notes travel with the copy


def test_bad_ou_files_and_mismatched_references_are_one_line_errors(tmp_path):
    bad = tmp_path / "tofu_forget01_bad"
    bad.mkdir()
    (bad / "TOFU_EVAL.json").write_text("{not json")
    proc = run_command(["unlearn", "report", str(bad)])
    assert proc.returncode == 2 and str(bad / "TOFU_EVAL.json") in proc.stderr and "not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr
    ou = write_ou(tmp_path / "tofu_forget01_npo", tofu_logs())
    short = write_ou(tmp_path / "tofu_forget01_retain", tofu_logs(REFERENCE_TR[:3], 0.9))
    assert read_ou_folder(short)[0].task == "tofu_forget01"  # from its folder name (3 items is no TOFU split)
    assert main(["report", str(ou), "--reference", str(short)]) == 2
    empty = tmp_path / "nothing"
    empty.mkdir()
    assert main(["report", str(ou), "--reference", str(empty)]) == 2
