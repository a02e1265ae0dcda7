"""Recovery report against hand values, from lm-eval results files."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from unlearn_app.reports.attack_recovery import recovery_ratio, recovery_rows, to_markdown


def _results(path, values):
    path.mkdir(parents=True)
    (path / "results_2026-01-01.json").write_text(json.dumps(
        {"results": {"tofu_forget10": {f"{k},none": v for k, v in values.items()} | {"forget_prob_stderr,none": 0.1}}}))
    return path


def _png_data(path):
    from PIL import Image

    with Image.open(path) as img:
        assert img.format == "PNG" and img.size[0] > 300
        return json.loads(img.text["recovery_data"])


def test_recovery_plot_draws_each_attack_and_leaves_out_missing_values(tmp_path):
    from unlearn_app.reports.plots import recovery_dots

    rows = recovery_rows({"t/p": 0.1, "t/u": 0.8}, {"int4": {"t/p": 0.4, "t/u": 0.7}, "relearn": {"t/p": 0.7, "t/u": 0.8}},
                         ["t/p", "t/u"], {"t/p": 0.9, "t/u": 0.8})  # no retain; target = unlearned on t/u
    drawn = recovery_dots(rows, tmp_path / "r.png")
    assert drawn == _png_data(tmp_path / "r.png")
    assert drawn["t/p"] == {"int4": {"unlearned": 0.1, "after": 0.4, "target": 0.9, "recovery_label": "recovery 0.38"},
                            "relearn": {"unlearned": 0.1, "after": 0.7, "target": 0.9, "recovery_label": "recovery 0.75"}}
    assert drawn["t/u"]["int4"] == {"unlearned": 0.8, "after": 0.7, "target": 0.8}  # recovery undefined: no label


def test_recovery_ratio_by_hand():
    assert recovery_ratio(0.2, 0.5, 0.8) == pytest.approx(0.5)
    assert recovery_ratio(0.2, 0.2, 0.8) == 0.0
    assert recovery_ratio(0.9, 0.6, 0.3) == pytest.approx(0.5)  # metrics that fall towards the target work too
    assert recovery_ratio(0.4, 0.5, 0.4) is None and recovery_ratio(None, 0.5, 0.4) is None


def test_rows_and_missing_metric_message():
    rows = recovery_rows({"t/p": 0.1}, {"quant4": {"t/p": 0.4}, "relearn": {"t/p": 0.7}}, ["t/p"], {"t/p": 0.9}, {"t/p": 0.2})
    assert [(r.attack, r.recovery) for r in rows] == [("quant4", pytest.approx(0.375)), ("relearn", pytest.approx(0.75))]
    assert "| quant4 | t/p | 0.1000 | 0.4000 | 0.9000 | 0.2000 | 0.3750 |" in to_markdown(rows)
    with pytest.raises(ValueError, match="the unlearned model's results has no metric 't/q'; it has: t/p"):
        recovery_rows({"t/p": 0.1}, {"a": {"t/p": 0.4}}, ["t/q"])


def test_attack_report_command(tmp_path):
    u = _results(tmp_path / "unlearned", {"forget_prob": 0.2, "model_utility": 0.6})
    q = _results(tmp_path / "quant", {"forget_prob": 0.35, "model_utility": 0.55})
    t = _results(tmp_path / "target", {"forget_prob": 0.8, "model_utility": 0.62})
    r = _results(tmp_path / "retain", {"forget_prob": 0.25, "model_utility": 0.61})
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "unlearn_app", "attack", "report", "--unlearned", str(u),
                           "--attacked", f"int4={q}", "--target", str(t), "--retain", str(r),
                           "--metrics", "tofu_forget10/forget_prob,tofu_forget10/model_utility", "--out", str(out)],
                          capture_output=True, text=True, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "report.json").read_text())
    got = {row["metric"]: row for row in data["rows"]}
    assert got["tofu_forget10/forget_prob"]["recovery"] == pytest.approx(0.25)  # (0.35 - 0.2) / (0.8 - 0.2)
    assert got["tofu_forget10/model_utility"]["recovery"] == pytest.approx(-2.5)  # (0.55 - 0.6) / (0.62 - 0.6)
    assert got["tofu_forget10/forget_prob"]["retain"] == 0.25
    md = (tmp_path / "report.md").read_text()
    assert "| int4 | tofu_forget10/forget_prob | 0.2000 | 0.3500 | 0.8000 | 0.2500 | 0.2500 |" in md
    # the plot draws the report's numbers (read back from the PNG's data chunk, written from the drawn markers)
    drawn = _png_data(tmp_path / "report.png")
    for row in data["rows"]:
        point = drawn[row["metric"]][row["attack"]]
        assert point == {"retain": pytest.approx(row["retain"]), "unlearned": pytest.approx(row["unlearned"]),
                         "after": pytest.approx(row["after"]), "target": pytest.approx(row["target"]),
                         "recovery_label": f"recovery {row['recovery']:.2f}"}
    bad = subprocess.run([sys.executable, "-m", "unlearn_app", "attack", "report", "--unlearned", str(u),
                          "--attacked", str(q), "--metrics", "tofu_forget10/forget_prob", "--out", str(out),
                          "--overwrite"],
                         capture_output=True, text=True, env=os.environ.copy())
    assert bad.returncode == 2 and "NAME=PATH" in bad.stderr
