"""The TOFU benchmark's bookkeeping (perf/bench_tofu_eval.py): open-unlearning's parts from its log, ours
from the timed calls, its generations from its results file; values computed by hand."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "perf" / "bench_tofu_eval.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_tofu_eval", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _line(seconds: float, who: str, message: str) -> str:
    minutes, sec = divmod(seconds, 60)
    return f"[2026-11-25 17:{int(minutes):02d}:{sec:06.3f}".replace(".", ",") + f"][{who}][INFO] - {message}"


def test_open_unlearning_parts_from_its_log(bench, tmp_path) -> None:
    log = tmp_path / "eval.log"
    log.write_text("\n".join([
        _line(0.0, "evaluator", "***** Running TOFU evaluation suite *****"),
        _line(1.0, "metrics", "Evaluating forget_Q_A_PARA_Prob"),          # likelihoods: 1 -> 13
        _line(13.0, "metrics", "Evaluating forget_truth_ratio"),           # metrics: 13 -> 13.5
        _line(13.5, "evaluator", "Result for metric forget_truth_ratio:\t0.44"),
        _line(14.0, "metrics", "Evaluating forget_Q_A_ROUGE"),             # generation: 14 -> 44
        _line(44.0, "evaluator", "Result for metric forget_Q_A_ROUGE:\t0.18"),
        _line(45.0, "metrics", "Evaluating mia_min_k"),                    # likelihoods: 45 -> 52.25
        _line(52.25, "metrics", "Evaluating model_utility"),               # metrics: 52.25 -> 52.75
        _line(52.75, "evaluator", "Result for metric model_utility:\t0.25"),
        "a line without a timestamp",
    ]) + "\n")
    parts = bench._ou_parts(log)
    assert parts == pytest.approx({"likelihoods": 12.0 + 7.25, "metrics": 0.5 + 0.5, "generation": 30.0})


def test_our_parts_split_the_wall_time(bench) -> None:
    timings = {"generate_until": 100.0, "unlearn_answer_logprobs": 20.0, "unlearn_answer_gradnorm": 5.0,
               "evaluate": 130.0, "model_load": 2.0}
    assert bench._our_parts(150.0, timings) == {"start-up": 20.0, "generation": 100.0, "likelihoods": 25.0,
                                                "metrics": 5.0, "total": 150.0}


def test_open_unlearning_results_metrics_and_generations(bench, tmp_path) -> None:
    results = {
        "forget_Q_A_ROUGE": {"agg_value": 0.5, "value_by_index": {
            "0": {"rougeL_recall": 0.5, "input": "Question: a?\nAnswer: ", "generation": "x y"}}},
        "ra_Q_A_ROUGE": {"agg_value": 1.0, "value_by_index": {
            "0": {"rougeL_recall": 1.0, "input": "Question: b?\nAnswer: ", "generation": "z"}}},
        "forget_quality": {"agg_value": 0.9},
        "mia_loss": {"agg_value": None},
    }
    path = tmp_path / "TOFU_EVAL.json"
    path.write_text(json.dumps(results))
    metrics, generations = bench._ou_results(path)
    assert metrics == {"forget_Q_A_ROUGE": 0.5, "ra_Q_A_ROUGE": 1.0, "forget_quality": 0.9}
    assert generations == [("Question: a?\nAnswer: ", "x y"), ("Question: b?\nAnswer: ", "z")]
