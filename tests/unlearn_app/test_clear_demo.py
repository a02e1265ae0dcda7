"""`unlearn demo --benchmark clear`: the option is offered, and (slow) the whole demo runs and writes its table."""

from __future__ import annotations

import json
import math

import pytest

from fixtures.commands import run_command


def test_demo_offers_the_clear_benchmark():
    proc = run_command(["unlearn", "demo", "--help"], timeout=120)
    assert proc.returncode == 0 and "--benchmark" in proc.stdout and "clear" in proc.stdout


@pytest.mark.slow
def test_clear_demo_end_to_end(tmp_path):
    pytest.importorskip("PIL")
    from unlearn_app.demo.clear import run_clear_demo

    table = run_clear_demo(tmp_path, epochs=20, quiet=True, items_per_set=3)
    assert list(table) == ["target", "graddiff (text)", "graddiff (image)", "graddiff (both)", "gold"]
    for name, metrics in table.items():
        for key in ("forget_caption_prob", "retain_caption_prob", "text_forget_prob", "text_retain_prob"):
            assert 0 < metrics[key] < 1, (name, key)
        assert not math.isnan(metrics["forget_quality"]), name
    assert table["target"]["text_forget_prob"] > table["gold"]["text_forget_prob"]  # the gold never saw them
    saved = json.loads((tmp_path / "clear_results.json").read_text())
    assert saved["task"] == "clear_forget10_image" and "| Model Utility |" in (tmp_path / "clear_report.md").read_text()
