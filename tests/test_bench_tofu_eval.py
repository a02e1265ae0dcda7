"""The TOFU benchmark's bookkeeping (benchmarks/bench_tofu_eval.py): open-unlearning's parts from its log, ours
from the timed calls, its generations from its results file; values computed by hand."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_tofu_eval.py"


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


def test_chat_setting_model_config(bench) -> None:
    """--chat runs open-unlearning with its Llama-3.2-1B-Instruct model config (chat template, system prompt, date
    string) on the CPU: its flash attention removed, float32."""
    assert bench._ou_model(False, "float32") == ["model=phi-1_5"]
    assert bench._ou_model(True, "float32") == ["model=Llama-3.2-1B-Instruct", "~model.model_args.attn_implementation",
                                                "model.model_args.torch_dtype=float32"]
    config = (Path(__file__).resolve().parents[1].parent / "open-unlearning" / "configs" / "model"
              / "Llama-3.2-1B-Instruct.yaml")
    if config.is_file():  # a checkout beside the worktrees: its template settings are the ones the bench states
        text = config.read_text()
        assert f"system_prompt: {bench.SYSTEM_PROMPT}" in text and f"date_string: {bench.DATE_STRING}" in text


def test_parts_missing_from_a_likelihood_only_run_count_zero(bench, capsys) -> None:
    parts = {"start-up": 1.0, "likelihoods": 2.0, "metrics": 0.5, "total": 3.5}
    summary = bench._print_parts([{"ours": dict(parts), "ou": dict(parts)}])
    assert summary["generation"] == {"ours": [0.0], "ou": [0.0]}


def test_launcher_gives_open_unlearning_a_list_of_ids(bench, tiny_model_dir, tmp_path) -> None:
    """open-unlearning indexes ``apply_chat_template(tokenize=True)`` as a list (transformers 4.45); the launcher
    gives it one on transformers 5, and runs the script as ``__main__`` with its folder on the path."""
    import subprocess
    import sys

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
    tok.save_pretrained(tmp_path / "tok")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "helper.py").write_text("VALUE = 'found'\n")
    (tmp_path / "src" / "script.py").write_text(
        "import sys\nfrom transformers import AutoTokenizer\nimport helper\n"
        f"tok = AutoTokenizer.from_pretrained({str(tmp_path / 'tok')!r})\n"
        "ids = tok.apply_chat_template([{'role': 'user', 'content': 'hi'}], tokenize=True)\n"
        "print(type(ids).__name__, ids[-1] == tok('hi', add_special_tokens=False)['input_ids'][-1], helper.VALUE,"
        " __name__, sys.argv[1:])\n")
    (tmp_path / "launcher.py").write_text(bench.OU_LAUNCHER)
    out = subprocess.run([sys.executable, str(tmp_path / "launcher.py"), str(tmp_path / "src" / "script.py"), "a=1"],
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["list", "True", "found", "__main__", "['a=1']"]
