"""Evaluation during unlearning (`unlearn run --eval-tasks T --eval-every N --select RULE`): one row per interval
plus steps 0 and last, the selected step is the arg-best of the rows, the output weights are that step's, the model
card names it, evaluating never changes training, and bad input stops before training with a message to act on."""

import json
import logging
import math

import pytest
import torch
from safetensors.torch import load_file

from fixtures.commands import run_command
from unlearn_app.checkpoint import model_card
from unlearn_app.pipeline import check_evaluation, run_unlearning
from unlearn_app.selection import SelectionError, parse_select
from unlearn_methods.config import load_run_config
from unlearn_methods.eval_during import BEST_DIR, ROWS_FILE, read_rows
from unlearn_methods.training import UnlearningFailed, train

TASK = "tofu_forget01_likelihood"
# forget01 of the demo corpus pairs 6 forget items; batch 2 and 2 epochs give 3 steps per epoch, 6 in all.
FINAL_STEP = 6


def _cfg(tmp_path, model_dir, data_dir, name="run", **kw):
    base = dict(method="graddiff", model=str(model_dir), out=str(tmp_path / name), data_dir=str(data_dir),
                forget="forget01", epochs=2, batch_size=2, lr=1e-2, lora=False, progress=False,
                eval_tasks=[TASK], eval_every=4)
    base.update(kw)
    return load_run_config(None, **base)


class Scripted:
    """An evaluator returning the next scripted value of ``fake/score`` and keeping a copy of the weights it saw."""

    def __init__(self, values, extra_metrics=None):
        self.values, self.extra = list(values), extra_metrics or {}
        self.seen: list[dict[str, torch.Tensor]] = []

    def __call__(self, model):
        assert not model.training and not torch.is_grad_enabled()
        self.seen.append({n: p.detach().clone() for n, p in model.named_parameters()})
        return {"fake": {"score": self.values[len(self.seen) - 1], **self.extra}}


def _saved(out):
    return load_file(str(out / "model.safetensors"))


def _equal_to(saved, params):
    return all(torch.equal(saved[n], p) for n, p in params.items() if n in saved)


def test_rows_at_step_0_every_interval_and_the_last_step_and_the_best_weights_are_the_output(
        tmp_path, tiny_model_dir, demo_data_dir):
    scripted = Scripted([0.5, 0.9, 0.2])  # steps 0, 4, 6: the best (max) is step 4
    trained = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, select="fake/score:max"),
                    select=parse_select("fake/score:max"), evaluator=scripted)
    rows = read_rows(trained.out / ROWS_FILE)
    assert [r["step"] for r in rows] == [0, 4, FINAL_STEP]
    assert [r["epoch"] for r in rows] == [0.0, pytest.approx(4 / 3, abs=1e-3), 2.0]
    assert [r["fake/score"] for r in rows] == [0.5, 0.9, 0.2]
    best = max(rows, key=lambda r: r["fake/score"])["step"]  # the arg-best, read back from the written file
    assert best == 4 and trained.eval_during_training["selected_step"] == best
    saved = _saved(trained.out)
    assert _equal_to(saved, scripted.seen[1])  # the weights evaluated at step 4 ...
    assert not _equal_to(saved, scripted.seen[2])  # ... and not the last step's (training moved them)
    assert not (trained.out / BEST_DIR).exists()  # the temporary copy is gone
    record = json.loads((trained.out / "train_metrics.json").read_text())["eval_during_training"]
    assert record["selected_step"] == 4 and record["select"] == "fake/score:max" and record["evaluated_steps"] == [0, 4, 6]


def test_min_rule_and_nan_values_are_never_selected(tmp_path, tiny_model_dir, demo_data_dir, caplog):
    scripted = Scripted([math.nan, 0.3, 0.1])  # min: step 6; step 0 is NaN
    with caplog.at_level(logging.WARNING):
        trained = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, select="fake/score:min"),
                        select=parse_select("fake/score:min"), evaluator=scripted)
    assert trained.eval_during_training["selected_step"] == FINAL_STEP
    assert "NaN at step 0" in caplog.text
    assert read_rows(trained.out / ROWS_FILE)[0]["fake/score"] != read_rows(trained.out / ROWS_FILE)[0]["fake/score"]
    assert json.loads((trained.out / ROWS_FILE).read_text().splitlines()[0])["fake/score"] is None  # NaN as null

    caplog.clear()
    scripted = Scripted([math.nan] * 3)
    with caplog.at_level(logging.WARNING):
        trained = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "allnan", select="fake/score:max"),
                        select=parse_select("fake/score:max"), evaluator=scripted)
    assert "NaN at every evaluated step" in caplog.text and "keeping the last weights" in caplog.text
    assert trained.eval_during_training["selected_value"] is None
    assert _equal_to(_saved(trained.out), scripted.seen[-1])


def test_evaluating_in_process_with_lm_eval_does_not_change_training(tmp_path, tiny_model_dir, demo_data_dir):
    """lm-eval reseeds the random generators and switches the model to eval mode; the run must not notice."""
    plain = run_unlearning(load_run_config(None, method="graddiff", model=str(tiny_model_dir), out=str(tmp_path / "plain"),
                                           data_dir=str(demo_data_dir), forget="forget01", epochs=1, batch_size=2,
                                           lr=1e-2, lora=True, merge=True, progress=False, seed=3))
    evaluated = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "evaluated", epochs=1, lora=True, merge=True,
                                    seed=3, eval_every=2, eval_limit=2, eval_tasks=[TASK]))
    rows = read_rows(evaluated / ROWS_FILE)
    assert [r["step"] for r in rows] == [0, 2, 3]
    assert all(0 < r[f"{TASK}/forget_prob"] < 1 for r in rows)
    a, b = _saved(plain), _saved(evaluated)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (evaluated / "eval_during_training.png").stat().st_size > 10_000


def test_interrupt_keeps_the_rows_written_so_far(tmp_path, tiny_model_dir, demo_data_dir):
    class Interrupting(Scripted):
        def __call__(self, model):
            if self.seen:
                raise KeyboardInterrupt
            return super().__call__(model)

    with pytest.raises(UnlearningFailed, match=r"Interrupted at step 4.*evaluations made so far.*eval_during_training"):
        train(_cfg(tmp_path, tiny_model_dir, demo_data_dir), evaluator=Interrupting([0.5]))
    rows = read_rows(tmp_path / "run.partial" / ROWS_FILE)  # the stopped run's folder (run/ appears when complete)
    assert rows == [{"step": 0, "epoch": 0.0, "fake/score": 0.5}]


def test_a_metric_the_task_does_not_produce_stops_at_the_step_0_evaluation(tmp_path, tiny_model_dir, demo_data_dir):
    scripted = Scripted([0.5, 0.5, 0.5], extra_metrics={"other": 1.0})
    with pytest.raises(UnlearningFailed, match=r"--select fake/rouge:max: .*no metric 'rouge' for fake.*other', 'score"):
        train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, select="fake/rouge:max"),
              select=parse_select("fake/rouge:max"), evaluator=scripted)
    assert len(scripted.seen) == 1  # before any training step
    with pytest.raises(UnlearningFailed, match=r"no task 'tofu_forget10'.*fake"):
        train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "t", select="tofu_forget10/forget_prob:max"),
              select=parse_select("tofu_forget10/forget_prob:max"), evaluator=Scripted([0.5]))


@pytest.mark.parametrize("rule, message", [
    ("tofu_forget01/forget_prob", "write TASK/METRIC:max or TASK/METRIC:min"),
    ("tofu_forget01/forget_prob:median", "after the colon write max or min"),
    ("tofu_forget01/forget_prob >= 0.5:max", "unexpected '>='"),
    ("0.5:max", "names no TASK/METRIC"),
    ("baseline:max", "baseline has no meaning here"),
    ("abs(tofu_forget01/privleak:min", "')' expected"),
])
def test_bad_select_syntax(rule, message):
    with pytest.raises(SelectionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_select(rule)


def test_select_expressions_reuse_the_ci_check_grammar():
    rule = parse_select("abs(tofu_forget10/privleak):min")
    assert rule.mode == "min" and rule.tasks == ["tofu_forget10"]
    assert rule.score({"tofu_forget10": {"privleak": -12.5}}) == 12.5
    diff = parse_select("t/model_utility - t/forget_prob:MAX")
    assert diff.mode == "max" and diff.score({"t": {"model_utility": 0.75, "forget_prob": 0.25}}) == 0.5


@pytest.mark.parametrize("options, message", [
    (dict(select="t/m:max", eval_tasks=[], eval_every=None), "--select needs --eval-tasks"),
    (dict(eval_every=3, eval_tasks=[]), "--eval-every needs --eval-tasks"),
    (dict(eval_every=0), "--eval-every must be a positive number of optimizer steps, got 0"),
    (dict(eval_every=-2), "got -2"),
    (dict(eval_every=None, select=f"{TASK}/forget_prob:max"), "--select needs --eval-every"),
    (dict(eval_limit=0), "--eval-limit must be a positive"),
])
def test_bad_options_are_refused_before_anything_runs(options, message):
    base = dict(method="graddiff", model="m", out="o", eval_tasks=[TASK], eval_every=2)
    with pytest.raises(ValueError, match=message):
        load_run_config(None, **{**base, **options})


def test_unknown_tasks_are_refused_before_training():
    cfg = load_run_config(None, method="graddiff", model="m", out="o", eval_tasks=[TASK], eval_every=2,
                          select="tofu_forget11/forget_prob:max")
    with pytest.raises(SelectionError, match=r"unknown task\(s\) tofu_forget11"):
        check_evaluation(cfg)
    cfg = load_run_config(None, method="graddiff", model="m", out="o", eval_tasks=["tofu_nope"], eval_every=2)
    with pytest.raises(ValueError, match=r"--eval-tasks: unknown task\(s\) tofu_nope"):
        check_evaluation(cfg)
    cfg = load_run_config(None, method="graddiff", model="m", out="o", eval_tasks=[TASK], eval_every=2,
                          select=f"{TASK}/forget_prob:min")
    assert check_evaluation(cfg).mode == "min"


def test_methods_without_training_steps_refuse_eval_every(tmp_path, tiny_model_dir, demo_data_dir):
    with pytest.raises(UnlearningFailed, match="task_vector method does not train step by step"):
        train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, method="task_vector"), evaluator=Scripted([0.1]))


def test_model_card_names_the_selected_step():
    cfg = load_run_config(None, method="npo", model="me/base", out="o", eval_tasks=[TASK], eval_every=5,
                          select=f"{TASK}/forget_prob:min")
    record = {"file": ROWS_FILE, "every": 5, "tasks": [TASK], "final_step": 20, "evaluated_steps": [0, 5, 10, 15, 20],
              "select": cfg.select, "selected_step": 10, "selected_epoch": 2.5, "selected_value": 0.125}
    card = model_card.render(cfg, {"beta": 0.1}, "NPO", {}, None, True, record)
    assert "## Evaluation during unlearning" in card
    assert f"**Selected checkpoint: step 10** (epoch 2.5000), by `{TASK}/forget_prob:min` (value 0.1250)" in card
    assert "not the last step's (20)" in card and f"`{ROWS_FILE}`" in card


def test_cli_bad_select_exits_2_with_the_fix(tmp_path):
    proc = run_command(["unlearn", "run", "--method", "graddiff", "--model", "m", "--out", str(tmp_path / "o"),
                        "--eval-tasks", TASK, "--eval-every", "2", "--select", f"{TASK}/forget_prob"])
    assert proc.returncode == 2 and "write TASK/METRIC:max or TASK/METRIC:min" in proc.stderr
    proc = run_command(["unlearn", "run", "--method", "graddiff", "--model", "m", "--out", str(tmp_path / "o"),
                        "--select", f"{TASK}/forget_prob:max"])
    assert proc.returncode == 2 and "--select needs --eval-tasks" in proc.stderr


@pytest.mark.slow
def test_unlearn_run_selects_the_best_step_and_its_checkpoint_reproduces_the_row(tmp_path, tiny_model_dir,
                                                                                  demo_data_dir):
    """End to end through the command: lm-eval in process during training, the selected step is the arg-best of
    the written rows, and lm-eval run afresh on the saved (reloaded) checkpoint gives that row's numbers."""
    out = tmp_path / "run"
    rule = f"{TASK}/forget_truth_ratio:max"
    proc = run_command(["unlearn", "run", "--method", "graddiff", "--model", str(tiny_model_dir), "--data-dir",
                        str(demo_data_dir), "--forget", "forget01", "--epochs", "2", "--batch-size", "2", "--lr", "1e-2",
                        "--full", "--out", str(out), "--eval-tasks", TASK, "--eval-every", "2", "--eval-limit", "4",
                        "--select", rule])
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_rows(out / ROWS_FILE)
    assert [r["step"] for r in rows] == [0, 2, 4, 6]
    assert proc.stderr.count("eval at step") == 4  # one progress line per evaluation
    values = [r[f"{TASK}/forget_truth_ratio"] for r in rows]
    best = rows[values.index(max(values))]
    record = json.loads((out / "train_metrics.json").read_text())["eval_during_training"]
    assert record["selected_step"] == best["step"]
    assert f"**Selected checkpoint: step {best['step']}**" in (out / "README.md").read_text()
    from harness_ext.results import load_results

    final = load_results(out / "eval")[TASK]  # the saved checkpoint, evaluated after reloading it
    for metric, value in final.items():
        if math.isfinite(value):
            assert value == pytest.approx(best[f"{TASK}/{metric}"], rel=1e-5, abs=1e-7), metric
    assert (out / "eval_during_training.png").is_file()


def test_an_evaluation_leaves_train_mode_and_random_generators_as_they_were(tmp_path):
    """lm-eval's simple_evaluate reseeds torch, numpy and random and puts the model in eval mode."""
    import random
    from types import SimpleNamespace

    import numpy as np

    from unlearn_methods.eval_during import EvalDuringTraining

    def reseeding(model):
        torch.manual_seed(1234), np.random.seed(1234), random.seed(0)
        return {"t": {"m": float(model.weight.sum())}}

    model = torch.nn.Linear(3, 2).train()
    callback = EvalDuringTraining(reseeding, every=2, out=tmp_path)
    callback._start(0)
    torch.manual_seed(7), np.random.seed(7), random.seed(7)
    expected = (torch.rand(3), np.random.rand(), random.random())
    torch.manual_seed(7), np.random.seed(7), random.seed(7)
    callback._evaluate(model, SimpleNamespace(global_step=0, epoch=0.0))
    assert model.training
    after = (torch.rand(3), np.random.rand(), random.random())
    assert torch.equal(after[0], expected[0]) and after[1:] == expected[1:]
    assert read_rows(tmp_path / ROWS_FILE) == [{"step": 0, "epoch": 0.0, "t/m": pytest.approx(float(model.weight.sum()))}]


def test_resume_keeps_the_rows_up_to_the_resumed_step(tmp_path, tiny_model_dir, demo_data_dir):
    train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, epochs=1, eval_every=2, save_steps=1), evaluator=Scripted([1, 2, 3]))
    assert [r["step"] for r in read_rows(tmp_path / "run" / ROWS_FILE)] == [0, 2, 3]
    train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, epochs=2, eval_every=2, save_steps=1, resume=True),
          evaluator=Scripted([4, 5]))
    rows = read_rows(tmp_path / "run" / ROWS_FILE)
    assert [(r["step"], r["fake/score"]) for r in rows] == [(0, 1), (2, 2), (3, 3), (4, 4), (6, 5)]


def test_a_resume_stopped_while_it_rewrites_the_rows_keeps_them(tmp_path, tiny_model_dir, demo_data_dir, monkeypatch):
    """The rows up to the resumed step are written beside the file and replace it at once: a run stopped after the
    first of them is written (Ctrl-C, here) leaves every row it had, not a file cut after one row."""
    import types

    from unlearn_methods import eval_during

    train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, epochs=1, eval_every=2, save_steps=1), evaluator=Scripted([1, 2, 3]))
    rows_file = tmp_path / "run" / ROWS_FILE
    before = rows_file.read_bytes()
    written = []

    def dumps(obj, **kw):
        if written:
            raise KeyboardInterrupt
        written.append(obj)
        return json.dumps(obj, **kw)

    monkeypatch.setattr(eval_during, "json", types.SimpleNamespace(dumps=dumps, loads=json.loads))
    with pytest.raises(UnlearningFailed, match="Interrupted at step 3"):
        train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, epochs=2, eval_every=2, save_steps=1, resume=True),
              evaluator=Scripted([4, 5]))
    kept = tmp_path / "run.partial" / ROWS_FILE  # the resumed run's folder, where --resume goes on
    assert len(written) == 1 and kept.read_bytes() == before
    assert [r["step"] for r in read_rows(kept)] == [0, 2, 3]


def test_plot_puts_other_scales_in_a_second_panel_and_skips_nan(tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    from unlearn_app.reports.plots import metrics_vs_step

    rows = [{"step": s, "epoch": s / 3, "t/forget_prob": p, "t/privleak": leak}
            for s, p, leak in ((0, 0.9, -90.0), (3, math.nan, -40.0), (6, 0.2, math.nan))]
    one = metrics_vs_step([{k: v for k, v in r.items() if k != "t/privleak"} for r in rows], tmp_path / "a.png", "t", 3)
    two = metrics_vs_step(rows, tmp_path / "b.png", "t", 3)
    h1, h2 = PIL.open(one).size[1], PIL.open(two).size[1]
    assert h2 == pytest.approx(2 * h1, rel=0.02)  # one panel per scale


class ScriptedRows(Scripted):
    """Like Scripted, with a whole ``fake`` metrics dict per evaluation."""

    def __call__(self, model):
        self.seen.append({n: p.detach().clone() for n, p in model.named_parameters()})
        return {"fake": self.values[len(self.seen) - 1]}


def test_select_if_keeps_steps_that_fail_the_check_out(tmp_path, tiny_model_dir, demo_data_dir, caplog):
    # steps 0, 4, 6: the best score is step 4, but its utility fell below 0.9 x step 0's, so step 6 is chosen
    scripted = ScriptedRows([{"score": 0.1, "utility": 1.0}, {"score": 0.9, "utility": 0.5}, {"score": 0.6, "utility": 0.95}])
    rule = parse_select("fake/score:max", ["fake/utility >= 0.9 * baseline"])
    with caplog.at_level(logging.WARNING):
        trained = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, select="fake/score:max",
                             select_if=["fake/utility >= 0.9 * baseline"]), select=rule, evaluator=scripted)
    record = trained.eval_during_training
    assert record["selected_step"] == FINAL_STEP and record["ineligible_steps"] == [4]
    assert "step 4 cannot be selected" in caplog.text and "value 0.5 >= bound 0.9" in caplog.text
    assert _equal_to(_saved(trained.out), scripted.seen[2])
    card = model_card.render(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "c"), {}, "s", {}, None, False, record)
    assert "`fake/utility >= 0.9 * baseline`" in card


def test_select_if_errors():
    with pytest.raises(SelectionError, match=r"--select-if 'fake/utility >> 1'"):
        parse_select("fake/score:max", ["fake/utility >> 1"])
    with pytest.raises(ValueError, match="--select-if needs --select"):
        load_run_config(None, method="graddiff", model="m", out="o", eval_tasks=[TASK], eval_every=2,
                        select_if=[f"{TASK}/forget_prob <= 0.5"])
    cfg = load_run_config(None, method="graddiff", model="m", out="o", eval_tasks=[TASK], eval_every=2,
                          select=f"{TASK}/forget_prob:min", select_if=["tofu_nope/x >= 1"])
    with pytest.raises(SelectionError, match=r"unknown task\(s\) tofu_nope"):
        check_evaluation(cfg)


def test_the_best_copy_holds_its_step_in_the_same_file_as_its_weights(tmp_path):
    """The best step's weights and the step they are of are one file, replaced at once: a run killed while a later
    best is saved leaves the earlier pair or the later one, never one step's weights under another's number (two
    files, the weights replaced and then the step written, would); ``--resume`` reads the step from that file."""
    from unlearn_methods.eval_during import EvalDuringTraining, Selected

    model, rule = torch.nn.Linear(2, 1), parse_select("t/m:max")
    callback = EvalDuringTraining(lambda m: {}, 1, tmp_path, rule)
    callback.best = Selected(2, 0.5, 0.25, rule.text)
    callback._save_best(model)
    assert sorted(p.name for p in (tmp_path / BEST_DIR).iterdir()) == ["weights.safetensors"]
    resumed = EvalDuringTraining(lambda m: {}, 1, tmp_path, rule)
    resumed._start(3)
    assert resumed.best == Selected(2, 0.5, 0.25, rule.text)
    again = EvalDuringTraining(lambda m: {}, 1, tmp_path, rule)
    again._start(1)  # resumed before step 2: that copy is not this run's
    assert again.best is None and not (tmp_path / BEST_DIR).exists()
