"""One trial: `unlearn run` (train + lm-eval on the checkpoint) in its own folder (in this process, or under
``accelerate launch`` in several), then the spec's checks on the results. Returns the record that goes into
``trials.jsonl``; an error inside the trial is recorded, never raised (Ctrl-C is not an error: it stops the sweep)."""

from __future__ import annotations

import json
import os
import socket
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHECKPOINT = "model"  # the trial's `unlearn run --out`, inside its folder


def trial_options(resources: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`run_trial` that come from the spec's ``resources`` (none for one process)."""
    processes = int(resources.get("processes") or 1)
    return {"processes": processes} if processes > 1 else {}


def run_trial(trial: dict[str, Any], config: dict[str, Any], checks: list[str], baseline: str | None,
              folder: str, threads: int = 1, attacks: dict[str, dict[str, Any]] | None = None,
              on_row: Callable[[dict[str, Any]], None] | None = None, processes: int = 1) -> dict[str, Any]:
    """Run ``trial`` with the `unlearn run` options ``config`` (``out`` is set here) into ``folder``, then the
    ``attacks`` on its checkpoint (``{quantize: {...}, relearn: {...}}``), each evaluated on the same tasks.
    ``on_row``: called with every row of the evaluation during unlearning (``run: {eval_every}``) as it is written
    (one process only). ``processes`` > 1: the `unlearn run` under ``accelerate launch`` (:func:`launch_run`)."""
    import torch

    from harness_ext.results import latest_results_file, load_results
    from unlearn_app.pipeline import run_unlearning
    from unlearn_methods.config import load_run_config

    home = Path(folder)
    home.mkdir(parents=True, exist_ok=True)
    (home / "trial.json").write_text(json.dumps({"trial": trial, "config": config}, indent=2, default=str))
    record: dict[str, Any] = {**trial, "status": "failed", "host": socket.gethostname(), "pid": os.getpid()}
    start = time.time()
    caller_threads = torch.get_num_threads()
    torch.set_num_threads(threads)  # the same threads on every engine: the same numbers
    try:
        run_config = {**config, "out": str(home / CHECKPOINT)}
        if processes > 1:
            record["processes"] = processes
            out = launch_run(run_config, home, processes, threads)
        else:
            out = run_unlearning(load_run_config(None, **run_config), on_row=on_row)
        metrics: dict[str, dict[str, float]] = {}
        if config.get("eval_tasks"):
            results_file = latest_results_file(out / "eval")
            metrics = load_results(results_file)
            record["results_file"] = str(results_file.relative_to(home.parent.parent))
        if attacks:
            record["attacks"] = {name: attack(name, opts, out, config, home) for name, opts in attacks.items()}
        record.update(metrics=metrics, checks=check_results(checks, metrics, baseline), status="ok")
        record["passed"] = all(c["passed"] for c in record["checks"])
    except Exception as e:  # noqa: BLE001  (any failure of one trial is recorded and the sweep goes on)
        record["error"] = f"{type(e).__name__}: {e}"
        (home / "error.txt").write_text(traceback.format_exc())
    finally:  # the default engine runs trials in the caller's process: leave its threads (and so its numbers) as they were
        torch.set_num_threads(caller_threads)
    record["wall_s"] = round(time.time() - start, 2)
    return record


def launch_run(config: dict[str, Any], folder: Path, processes: int, threads: int = 1) -> Path:
    """`unlearn run` with the options ``config`` under ``accelerate launch`` in ``processes`` processes, one per GPU
    this process sees (CPU processes over gloo where it sees none), each with ``threads / processes`` threads; the
    options go to ``folder/run.yaml`` and the output to ``folder/launch.log``. Returns the checkpoint folder; a run
    that fails raises :class:`~unlearn_methods.training.UnlearningFailed` with its error line."""
    import subprocess

    import torch
    import yaml

    from unlearn_app.launch import launch_command
    from unlearn_methods.config import load_run_config
    from unlearn_methods.training import UnlearningFailed

    load_run_config(None, **config)  # checked here first, as in one process
    options = folder / "run.yaml"
    given = {k: v for k, v in config.items() if v is not None}  # as load_run_config takes them (None: the default)
    options.write_text(yaml.safe_dump(given, sort_keys=False))
    with socket.socket() as s:  # a free port for the processes to meet on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, threads // processes))}
    if not torch.cuda.is_available():
        env["ACCELERATE_USE_CPU"] = "true"
    command = launch_command(processes, port, ["run", "--config", str(options)])
    log = folder / "launch.log"
    with log.open("w") as f:
        done = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        lines = log.read_text(errors="replace").splitlines()
        said = next((line for line in reversed(lines) if line.startswith("error: ")), None)
        said = f": {said[len('error: '):]} (output: {log})" if said else f"; its output is in {log}"
        raise UnlearningFailed(f"unlearn run on {processes} processes exited with {done.returncode}{said}")
    return Path(config["out"])


def attack(name: str, opts: dict[str, Any], checkpoint: Path, config: dict[str, Any], home: Path) -> dict[str, Any]:
    """Attack the trial's checkpoint into ``home/attack-NAME`` (``quantize``: `unlearn attack quantize`;
    ``relearn``: `unlearn attack relearn` on the trial's forget split, its held-out forget probability before and
    after kept) and evaluate the attacked checkpoint like the trial's own."""
    out = home / f"attack-{name}"
    data_dir = config.get("data_dir") or (str(checkpoint / "demo_data") if (checkpoint / "demo_data").is_dir() else None)
    result: dict[str, Any] = dict(opts)
    if name == "quantize":
        from unlearn_methods.attacks.quantize import quantize_checkpoint

        quantize_checkpoint(checkpoint, out, bits=opts["bits"], group_size=opts.get("group_size"))
    else:
        from unlearn_methods.attacks.relearn import relearn

        seed = config["seed"] if opts.get("seed") is None else opts["seed"]
        r = relearn(checkpoint, out, data=config.get("data") or "tofu", forget=config["forget"], data_dir=data_dir,
                    relearn_fraction=opts.get("relearn_fraction"), relearn_data=opts.get("relearn_data"),
                    steps=opts["steps"], lr=opts["lr"], batch_size=opts["batch_size"], seed=seed, progress=False)
        result.update(seed=seed, held_out_prob_before=r.held_out_prob_before,
                      held_out_prob_after=r.held_out_prob_after,
                      recovery=r.held_out_prob_after - r.held_out_prob_before, measured=r.measured,
                      relearn_json=str((out / "relearn.json").relative_to(home.parent.parent)))
    if config.get("eval_tasks"):
        from harness_ext.evaluate import run_lm_eval
        from harness_ext.results import latest_results_file, load_results

        metadata = {**({"data_dir": data_dir} if data_dir else {}), **config["eval_metadata"]}
        run_lm_eval(out, list(config["eval_tasks"]), out / "eval", metadata, limit=config.get("eval_limit"))
        results_file = latest_results_file(out / "eval")
        result.update(metrics=load_results(results_file),
                      results_file=str(results_file.relative_to(home.parent.parent)))
    return result


def check_results(checks: list[str], metrics: dict[str, dict[str, float]], baseline: str | None) -> list[dict]:
    """The `unlearn ci` checks on one trial's metrics (``baseline``: the results of the model before unlearning)."""
    from unlearn_app.ci.checks import MissingValue, evaluate, lookup_in, parse_check
    from unlearn_app.ci.runner import load_baseline

    base = lookup_in(load_baseline(baseline), f"the baseline {baseline}") if baseline and checks else None
    outcomes = []
    for text in checks:
        try:
            outcomes.append(evaluate(parse_check(text), lookup_in(metrics, "the trial's results"), base).as_dict())
        except MissingValue as e:
            outcomes.append({"check": text, "passed": False, "value": None, "bound": None, "message": str(e)})
    return outcomes
