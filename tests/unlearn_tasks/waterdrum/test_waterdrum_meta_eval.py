"""WaterDrum meta-evaluation: pooling, strengths, scaling, AUROC, calibration R^2, report and plot."""

from __future__ import annotations

import json

import numpy as np
import pytest

from unlearn_tasks.waterdrum.meta_eval import (
    ModelRun,
    auroc,
    build_report,
    calibration_fit,
    minmax_scale,
    owner_strengths,
    pool_generations,
    scale_by_original,
    write_report,
)


def test_auroc_by_hand() -> None:
    # retain > forget pairs: 0.3 -> 1, 0.5 -> 2, 0.4 -> 1 + one tie (1/2) = 4.5 of 6
    assert auroc([0.1, 0.4], [0.3, 0.5, 0.4]) == pytest.approx(0.75)
    assert auroc([0.0, 0.1], [0.2, 0.3]) == 1.0
    assert auroc([0.2, 0.3], [0.0, 0.1]) == 0.0
    assert auroc([0.5], [0.5]) == 0.5
    sklearn = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    f, r = rng.normal(0, 1, 50).round(1), rng.normal(0.5, 1, 70).round(1)
    labels = np.r_[np.zeros(50), np.ones(70)]
    assert auroc(f, r) == pytest.approx(sklearn.roc_auc_score(labels, np.r_[f, r]))


def test_calibration_by_hand() -> None:
    fit = calibration_fit([1.0, 0.5, 0.0], [1.0, 0.6, 0.1])
    # m = (1 + 0.3) / 1.25; SS_res = 0.018; SS_tot = 0.406667
    assert fit.slope == pytest.approx(1.04)
    assert fit.r2 == pytest.approx(1 - 0.018 / 0.4066666667)
    assert calibration_fit([1, 0.5, 0], [0, 0, 1]).r2 == pytest.approx(-0.5)
    assert calibration_fit([100, 50, 0], [1.0, 0.6, 0.1]).r2 == pytest.approx(fit.r2)  # scale of r is irrelevant
    assert np.isnan(calibration_fit([1, 0.5], [0.3, 0.3]).r2)


def test_pooling_and_strengths() -> None:
    scores = np.array([[[0.5, 0.0], [0.1, 0.2]], [[0.3, 0.3], [0.9, 0.9]]])
    lengths = np.array([[3, 1], [0, 0]])
    pooled = pool_generations(scores, lengths)
    np.testing.assert_allclose(pooled, [[0.4, 0.05], [0.0, 0.0]])
    strengths = owner_strengths(np.array([[0.4, 0.0], [0.2, 0.1], [0.0, 0.3]]), [0, 0, 1], [0, 1])
    assert strengths == pytest.approx({0: 0.3, 1: 0.3})
    np.testing.assert_allclose(scale_by_original([0.2, 0.1], 0.2), [1.0, 0.5])
    np.testing.assert_allclose(minmax_scale([0.2, 0.11, 0.02], 0.2, 0.02), [1.0, 0.5, 0.0])


def test_report_json_and_plot(tmp_path) -> None:
    runs = [
        ModelRun("original", forget=0.2, retain=0.25, role="original", fraction_trained=1.0),
        {"name": "half", "forget": 0.12, "retain": 0.24, "fraction_trained": 0.5},
        ModelRun("retrained", forget=0.02, retain=0.26, role="retrained", fraction_trained=0.0,
                 forget_scores=[0.1, 0.4], retain_scores=[0.3, 0.5, 0.4]),
        ModelRun("ga", forget=0.05, retain=0.1),
    ]
    report = build_report(runs)
    assert [r["forget_scaled"] for r in report["runs"]] == pytest.approx([1.0, 0.6, 0.1, 0.25])
    assert report["separability_auroc"] == pytest.approx(0.75)
    assert report["calibration"]["r2"] == pytest.approx(calibration_fit([1, 0.5, 0], [1.0, 0.6, 0.1]).r2)
    mm = build_report(runs, scale="minmax")
    assert mm["runs"][2]["forget_scaled"] == pytest.approx(0.0)
    paths = write_report(report, tmp_path / "out")
    assert json.loads(paths["json"].read_text())["metric"] == "waterdrum"
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_meta_eval_bad_input() -> None:
    with pytest.raises(ValueError):
        auroc([], [0.1])
    with pytest.raises(ValueError):
        auroc([float("nan")], [0.1])
    with pytest.raises(ValueError):
        calibration_fit([1.0], [0.5])
    with pytest.raises(ValueError):
        calibration_fit([0, 0], [0.5, 0.1])
    with pytest.raises(ValueError):
        calibration_fit([1, 0.5], [0.5])
    with pytest.raises(ValueError):
        scale_by_original([0.1], 0.0)
    with pytest.raises(ValueError):
        ModelRun("x", 0.1, 0.1, role="baseline")
    with pytest.raises(ValueError):
        build_report([ModelRun("a", 0.1, 0.2)])  # no original to scale by
    with pytest.raises(ValueError):
        build_report([ModelRun("a", 0.1, 0.2, role="original"), ModelRun("a", 0.1, 0.2)])
    with pytest.raises(ValueError):
        build_report([ModelRun("a", 0.1, 0.2, role="original")], scale="zscore")
    with pytest.raises(ValueError):
        pool_generations(np.zeros((2, 3)), np.zeros((2, 3)))
