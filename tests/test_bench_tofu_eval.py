"""The TOFU benchmark's bookkeeping (benchmarks/bench_tofu_eval.py): open-unlearning's parts from its log, ours
from the timed calls, its generations from its results file; values computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_tofu_eval.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(SCRIPT)


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


def _run(total: float, metrics: dict) -> dict:
    return {"parts": {"start-up": 1.0, "total": total}, "metrics": metrics}


def _pair(ours: float, theirs: float | None, identical: int = 68, ours_m: dict | None = None,
          theirs_m: dict | None = None) -> dict:
    ours_m = ours_m if ours_m is not None else {"forget_prob": 0.5, "mia_reference_auc": 0.45}
    theirs_m = theirs_m if theirs_m is not None else {"forget_Q_A_Prob": 0.50001, "mia_reference": 0.5}
    gen = {"identical": {"matched": 68, "identical": identical}} if theirs is not None else {}
    return {"ours": _run(ours, ours_m), "ou": _run(theirs, theirs_m) if theirs is not None else None, "generation": gen}


def test_metric_pairs_equal_within_the_tolerance(bench) -> None:
    nan = float("nan")
    ours = {"forget_prob": 0.5, "retain_prob": 0.3, "privleak": nan, "forget_quality": nan, "model_utility": 0.2}
    theirs = {"forget_Q_A_Prob": 0.50005, "retain_Q_A_Prob": 0.3002, "privleak": nan, "forget_quality": 0.1}
    # retain 2e-4 > 1e-4; forget_quality NaN on one side only; model_utility on ours only; privleak NaN = NaN
    assert bench._metric_differences(ours, theirs, 1e-4) == ["forget_quality", "retain_prob", "model_utility"]
    assert bench._metric_differences(ours, theirs, 1e-3, skip=("forget_quality", "model_utility")) == []


def test_sweep_rows_and_markdown_table(bench) -> None:
    """Three settings from recorded runs: min/median per side, ratios, equal metrics and identical texts, by hand."""
    assert bench._settings([8, 16], [1, 2]) == [(8, 1), (16, 1), (8, 2), (16, 2)]
    first = [_pair(10.0, 20.0), _pair(12.0, 18.0, identical=67), _pair(11.0, 25.0)]
    row = bench._setting_row(8, 1, first, 1e-4, skip=("mia_reference_auc",))
    assert row["ours_min"] == 10.0 and row["ours_median"] == 11.0
    assert row["ou_min"] == 18.0 and row["ou_median"] == 20.0
    assert row["ratio_min"] == pytest.approx(10 / 18)
    assert row["ratio_median"] == pytest.approx(0.5)  # of 10/20, 12/18, 11/25
    assert row["equal_metrics"] is True and row["identical"] == "67/68" and row["pairs"] == 3
    # without the skip, mia_reference (0.45 vs 0.5) is unequal
    assert bench._setting_row(8, 1, first, 1e-4)["unequal"] == ["mia_reference_auc"]
    second = bench._setting_row(16, 2, [_pair(9.0, 12.0, ours_m={"forget_prob": 0.4},
                                              theirs_m={"forget_Q_A_Prob": 0.5})], 1e-4)
    assert second["equal_metrics"] is False and second["unequal"] == ["forget_prob"]
    assert second["ratio_min"] == second["ratio_median"] == 0.75
    alone = bench._setting_row(32, 1, [_pair(7.0, None), _pair(5.0, None)], 1e-4)
    assert alone["ours_min"] == 5.0 and alone["ou_min"] is None and alone["equal_metrics"] is None

    header = {"date_before": "2026-11-27 02:00:00 UTC", "date_after": "2026-11-27 03:00:00 UTC",
              "machine": "host x86_64", "cpu": "Some CPU", "cpus": "2", "load_before": "load average 0.10 0.20 0.30",
              "load_after": "load average 1.00 1.10 1.20", "ou_env": "own (...): Python 3.11.7; torch 2.4.1",
              "command": "python benchmarks/bench_tofu_eval.py --batch-sizes 8 16"}
    lines = bench._markdown(header, [row, second, alone]).splitlines()
    assert lines[0] == ("**2026-11-27**, 2026-11-27 02:00:00 UTC to 2026-11-27 03:00:00 UTC; machine host x86_64, "
                        "CPU Some CPU (2 CPUs); load average 0.10 0.20 0.30 before, load average 1.00 1.10 1.20 after.")
    assert lines[2] == "open-unlearning environment: own (...): Python 3.11.7; torch 2.4.1."
    assert lines[-3:] == ["| 8 | 1 | 3 | 10.0 | 11.0 | 18.0 | 20.0 | 0.556 | 0.500 | yes | 67/68 |",
                          "| 16 | 2 | 1 | 9.0 | 9.0 | 12.0 | 12.0 | 0.750 | 0.750 | no: forget_prob | 68/68 |",
                          "| 32 | 1 | 2 | 5.0 | 6.0 | - | - | - | - | - | - |"]


def test_ou_env_arguments(bench, tmp_path) -> None:
    """--ou-env: its choices and what each installs; own needs the checkout and a Python 3.11; a kept venv of the
    other kind is refused in one line; the old --batch-size spelling still works."""
    parser = bench._parser()
    args = parser.parse_args(["--batch-size", "16"])
    assert args.ou_env == "ours" and args.batch_sizes == [16] and args.threads == [1]
    assert parser.parse_args(["--batch-sizes", "8", "16", "--threads", "1", "2"]).batch_sizes == [8, 16]

    def check(*argv: str) -> None:
        with pytest.raises(SystemExit):
            bench._check_args(parser, parser.parse_args(list(argv)))

    for argv in (["--ou-env", "own"], ["--batch-sizes", "8", "8"], ["--threads", "0"]):
        check(*argv)
    with pytest.raises(SystemExit):
        parser.parse_args(["--ou-env", "conda"])
    fake = {}
    for version in ("3.10", "3.11"):
        fake[version] = tmp_path / f"python{version}"
        fake[version].write_text(f"#!/bin/sh\necho {version}\n")
        fake[version].chmod(0o755)
    ou = str(tmp_path / "ou")
    check("--ou-env", "own", "--open-unlearning", ou, "--ou-python", str(fake["3.10"]))
    check("--ou-env", "own", "--open-unlearning", ou, "--ou-python", str(tmp_path / "absent"))
    bench._check_args(parser, parser.parse_args(["--ou-env", "own", "--open-unlearning", ou, "--ou-python",
                                                 str(fake["3.11"])]))

    checkout = tmp_path / "ou"
    assert bench._ou_install_steps(checkout, "own") == [["-r", f"{checkout}/requirements.txt"], [f"{checkout}[lm-eval]"]]
    assert bench._ou_install_steps(checkout, "ours") == [["--no-deps", str(checkout)], bench.OU_REQUIREMENTS]
    assert bench._ou_venv_command("own", tmp_path / "v", "python3.11") == ["python3.11", "-m", "venv", f"{tmp_path}/v"]
    assert "--system-site-packages" in bench._ou_venv_command("ours", tmp_path / "v", "python3.11")
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / bench.VENV_MARKER).write_text("ok\n")  # a venv kept before --ou-env existed: ours
    assert bench.ou_venv(checkout, venv, "ours") == venv / "bin" / "python"
    with pytest.raises(SystemExit, match="holds open-unlearning's 'ours' environment, not 'own'"):
        bench.ou_venv(checkout, venv, "own")
    check("--ou-env", "own", "--open-unlearning", ou, "--venv", str(venv))  # refused before anything runs
    bench._check_args(parser, parser.parse_args(["--venv", str(venv)]))
    env = bench._env(2, isolated=True)
    assert "PYTHONPATH" not in env and env["PYTHONNOUSERSITE"] == "1" and env["OMP_NUM_THREADS"] == "2"


def test_model_folder_view_for_transformers_4(bench, tmp_path) -> None:
    """open-unlearning's own environment (transformers 4.45) gets a transformers-5 folder in 4.x's keys: RoPE base,
    scaling, dtype, tokenizer class and model inputs, chat template; the other files linked, not copied."""
    src = tmp_path / "model"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({
        "model_type": "llama", "dtype": "float32",
        "rope_parameters": {"rope_theta": 100000.0, "rope_type": "linear", "factor": 2.0}}))
    (src / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "TokenizersBackend", "eos_token": "</s>"}))
    (src / "chat_template.jinja").write_text("{{ messages }}")
    (src / "model.safetensors").write_bytes(b"weights")
    view = Path(bench._ou_model_view(str(src), tmp_path / "views"))
    assert view == tmp_path / "views" / "model"
    assert json.loads((view / "config.json").read_text()) == {
        "model_type": "llama", "dtype": "float32", "torch_dtype": "float32",
        "rope_parameters": {"rope_theta": 100000.0, "rope_type": "linear", "factor": 2.0},
        "rope_theta": 100000.0, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    assert json.loads((view / "tokenizer_config.json").read_text()) == {
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>",
        "model_input_names": ["input_ids", "attention_mask"], "chat_template": "{{ messages }}"}
    assert (view / "model.safetensors").is_symlink() and (view / "model.safetensors").read_bytes() == b"weights"
    assert bench._ou_model_view(str(src), tmp_path / "views") == str(tmp_path / "views" / "model_2")  # no clash
    # a folder in 4.x's keys already is used as it is
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text(json.dumps({"rope_theta": 10000.0, "torch_dtype": "float32"}))
    (old / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GPT2Tokenizer"}))
    assert bench._ou_model_view(str(old), tmp_path / "views") == str(old)
