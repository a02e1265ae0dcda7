"""``unlearn sweep --engine ray`` with ``early_stop`` in the spec: every trial is a Ray Tune trial that reports each
row of its evaluation during unlearning (``run: {eval_every: N}``) as it is written, and a Tune stopper
(:class:`ray.tune.stopper.FunctionStopper`) stops the trial when the row's ``early_stop.metric`` is below
``below`` (or above ``above``). The decision, the stop and the retry of a trial whose worker died
(:class:`ray.tune.FailureConfig`) are Ray Tune's; this module only turns Tune's trials into ``trials.jsonl`` records.

A trial's report blocks its training until Tune has seen the row, so a stopped trial trains no step past the row
that stopped it. Its record has ``status: stopped``, the row (``stopped``: rule, step, epoch, value) and that row's
metrics; it has no final checkpoint and no results file. Ray Tune is imported only here (``--engine ray``)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from unlearn_app.sweep.spec import Trial
from unlearn_app.sweep.trial import run_trial

ENGINE = "ray-tune"


def stop_rule(early_stop: dict[str, Any]) -> str:
    """The rule as text, e.g. ``tofu_forget01/model_utility < 0.3``."""
    parts = [f"{early_stop['metric']} < {early_stop['below']:g}" if early_stop.get("below") is not None else "",
             f"{early_stop['metric']} > {early_stop['above']:g}" if early_stop.get("above") is not None else ""]
    return " or ".join(p for p in parts if p)


def fires(early_stop: dict[str, Any], result: dict[str, Any]) -> bool:
    """Whether a reported row crosses a bound of ``early_stop`` (a row without the metric, or NaN, never does)."""
    value = result.get(early_stop["metric"])
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return False
    below, above = early_stop.get("below"), early_stop.get("above")
    return (below is not None and value < below) or (above is not None and value > above)


def stopped_record(trial: Trial, early_stop: dict[str, Any], last: dict[str, Any]) -> dict[str, Any]:
    """The record of a trial Tune stopped, from its last reported row ``last``."""
    metrics: dict[str, dict[str, float]] = {}
    for key, value in last.items():
        if "/" in key and isinstance(value, (int, float)):
            task, name = key.split("/", 1)
            metrics.setdefault(task, {})[name] = value
    return {**trial.as_dict(), "status": "stopped", "engine": ENGINE, "metrics": metrics,
            "stopped": {"rule": stop_rule(early_stop), "step": last.get("step"), "epoch": last.get("epoch"),
                        "value": last.get(early_stop["metric"])},
            "host": last.get("hostname"), "pid": last.get("pid"), "wall_s": round(float(last.get("time_total_s", 0)), 2)}


def run_tune(tasks: list[tuple[Trial, tuple]], resources: dict[str, Any], early_stop: dict[str, Any],
             out: str | Path, on_record: Callable[[dict], None], address: str | None = None,
             trial_fn: Callable[..., dict] = run_trial) -> None:
    """Run every ``(trial, arguments of trial_fn)`` as a Ray Tune trial (``resources``: cpus, gpus and max_retries
    per trial) stopped by ``early_stop``; record each as it ends. Tune's own files go to ``out/ray-tune``."""
    import ray
    from ray import tune

    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    by_id = {trial.id: (trial, args) for trial, args in tasks}
    cwd = os.getcwd()  # the spec's relative paths are read from here; Tune starts trials in their own folders
    recorded: set[str] = set()

    def trainable(config: dict[str, Any]) -> None:
        os.chdir(cwd)
        _, args = by_id[config["trial"]]

        def report(row: dict[str, Any]) -> None:
            tune.report({k: v for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})

        record = trial_fn(*args, on_row=report)
        tune.report({"record": json.dumps(record, default=str)})  # the finished trial's record (no metric in it)

    class Recorder(tune.Callback):
        """Turns every ended Tune trial into a record, in this process, as it ends."""

        def on_trial_complete(self, iteration: int, trials: list, trial, **info: Any) -> None:
            sweep_trial, _ = by_id[trial.config["trial"]]
            last = trial.last_result or {}
            if "record" in last:
                record = json.loads(last["record"])
            elif fires(early_stop, last):
                record = stopped_record(sweep_trial, early_stop, last)
            else:  # ended by Tune without finishing or firing the rule (the sweep was interrupted): not finished
                return
            record["engine"] = ENGINE
            recorded.add(sweep_trial.id)
            on_record(record)

        def on_trial_error(self, iteration: int, trials: list, trial, **info: Any) -> None:
            sweep_trial, _ = by_id[trial.config["trial"]]
            error = trial.get_pickled_error()
            text = f"{type(error).__name__}: {str(error).strip().splitlines()[0]}" if error else "the Tune trial failed"
            recorded.add(sweep_trial.id)
            on_record({**sweep_trial.as_dict(), "status": "failed", "engine": ENGINE,
                       "error": f"{text} (after {int(resources['max_retries'])} retries)"})

    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": resources["cpus"], "gpu": resources["gpus"]}),
        param_space={"trial": tune.grid_search(list(by_id))},
        tune_config=tune.TuneConfig(num_samples=1, reuse_actors=False),
        run_config=tune.RunConfig(
            name="trials", storage_path=str(Path(out).resolve() / "ray-tune"), verbose=0,
            stop=tune.stopper.FunctionStopper(lambda _trial_id, result: fires(early_stop, result)),
            failure_config=tune.FailureConfig(max_failures=int(resources["max_retries"])), callbacks=[Recorder()]))
    tuner.fit()  # Ctrl-C: Tune stops the running trials and returns
    if set(by_id) - recorded:
        raise KeyboardInterrupt(f"{len(set(by_id) - recorded)} Tune trial(s) ended unfinished")
