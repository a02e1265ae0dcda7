"""Running a sweep: the output folder, the results stream (``trials.jsonl``, one line per finished trial, flushed as
it ends), ``--resume``, and the default engine (trials one after another on this machine).

Layout of ``--out DIR``::

    DIR/spec.yaml              the spec as given (the last run's)
    DIR/trials.jsonl           one JSON record per finished trial (ok or failed); a rerun's record comes later
    DIR/trials/<id>/           trial.json (its options), model/ (the `unlearn run --out`, with eval/), error.txt
    DIR/leaderboard.{md,json,html,png}
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness_ext.results import json_safe
from unlearn_app.sweep.spec import Spec, Trial
from unlearn_app.sweep.trial import CHECKPOINT, run_trial

TRIALS_FILE = "trials.jsonl"
TrialFn = Callable[..., dict[str, Any]]


class SweepError(ValueError):
    """The sweep cannot start (output folder, engine); the message says what to fix."""


def read_records(out: str | Path) -> dict[str, dict[str, Any]]:
    """The newest record of every trial in ``out/trials.jsonl`` (a half-written last line is ignored)."""
    path = Path(out) / TRIALS_FILE
    records: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            records[record["id"]] = record
    return records


def append_record(out: str | Path, record: dict[str, Any]) -> None:
    """One line in ``out/trials.jsonl``, on disk before this returns."""
    with open(Path(out) / TRIALS_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(json_safe(record), sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def prepare(spec: Spec, out: str | Path, resume: bool = False, retry_failed: bool = False) -> list[Trial]:
    """Check ``out`` and return the trials still to run (all of them, or with ``resume`` those without a record;
    failed ones too with ``retry_failed``; a trial stopped early by ``early_stop`` is finished)."""
    out = Path(out)
    if out.is_file():
        raise SweepError(f"--out {out} is a file; give a folder")
    if out.is_dir() and any(out.iterdir()) and not resume:
        held = "a sweep (trials.jsonl); pass --resume to continue it" if (out / TRIALS_FILE).exists() else "files"
        raise SweepError(f"--out {out} is not empty: it holds {held}, or choose an empty --out")
    out.mkdir(parents=True, exist_ok=True)
    (out / "spec.yaml").write_text(spec.text, encoding="utf-8")
    done = read_records(out) if resume else {}
    keep = {"ok", "failed", "stopped"} if not retry_failed else {"ok", "stopped"}
    return [t for t in spec.trials if done.get(t.id, {}).get("status") not in keep]


def trial_args(spec: Spec, trial: Trial, out: str | Path) -> tuple:
    """The arguments of :func:`run_trial` for ``trial`` (plain data: they travel to Ray workers)."""
    folder = Path(out).resolve() / "trials" / trial.id
    config = spec.trial_config(trial, folder / "model")
    if trial.after:  # a sequential stage unlearns the previous stage's checkpoint
        config["model"] = str(Path(out).resolve() / "trials" / trial.after / CHECKPOINT)
    return (trial.as_dict(), config, [c.text for c in spec.evaluation.checks],
            spec.evaluation.baseline, str(folder), int(spec.resources["cpus"]), spec.attacks)


def blocked(trial: Trial, records: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The failed record of a stage whose previous stage has not finished ok (it is not run), else None."""
    if not trial.after or records.get(trial.after, {}).get("status") == "ok":
        return None
    return {**trial.as_dict(), "status": "failed", "wall_s": 0.0,
            "error": f"stage {trial.stage} not run: the previous stage {trial.after} did not finish ok"}


def waves(trials: list[Trial]) -> list[list[Trial]]:
    """``trials`` grouped so that each sequential stage comes in a later group than the stage before it."""
    groups: dict[int, list[Trial]] = {}
    for trial in trials:
        groups.setdefault(trial.stage or 1, []).append(trial)
    return [groups[k] for k in sorted(groups)]


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (its entries, else 0, 1, ...)."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    named = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return (named or [str(i) for i in range(count)])[:count]


def lanes(gpus: list[str], per_trial: float) -> list[str]:
    """The CUDA_VISIBLE_DEVICES value of each concurrent trial: the GPUs in groups of ``ceil(per_trial)`` (at
    least one each; a fraction still takes a whole GPU)."""
    size = max(1, math.ceil(per_trial))
    return [",".join(gpus[i:i + size]) for i in range(0, len(gpus) - size + 1, size)]


def _pin(devices: str) -> None:
    """A worker process's initializer: the trial sees only its lane's GPUs (before torch initialises CUDA)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = devices


def run_local(spec: Spec, out: str | Path, trials: list[Trial], on_record: Callable[[dict], None],
              trial_fn: TrialFn = run_trial) -> None:
    """The default engine: one trial at a time in this process, or with several GPUs visible one trial per GPU
    (``resources.gpus`` per trial), each in a fresh worker process pinned to its GPU by CUDA_VISIBLE_DEVICES; a
    sequential stage starts once the stage before it has ended."""
    gpus = visible_gpus()
    pinned = lanes(gpus, spec.resources["gpus"]) if len(gpus) > 1 else []
    if len(pinned) > 1:
        for wave in waves(trials):
            _run_pinned(spec, out, wave, on_record, trial_fn, pinned)
        return
    records = read_records(out)
    for trial in trials:
        record = blocked(trial, records) or trial_fn(*trial_args(spec, trial, out))
        record["engine"] = "local"
        records[trial.id] = record
        on_record(record)


def _run_pinned(spec: Spec, out: str | Path, trials: list[Trial], on_record: Callable[[dict], None],
                trial_fn: TrialFn, pinned: list[str]) -> None:
    """``trials`` (none depending on another) over the lanes ``pinned``: each lane one worker process at a time
    (a fresh one per trial), the next trial given to whichever lane is free."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    records = read_records(out)
    pending = []
    for trial in trials:
        if (record := blocked(trial, records)) is not None:
            on_record({**record, "engine": "local"})
        else:
            pending.append(trial)
    pending.reverse()  # pop() takes them in the spec's order
    context = multiprocessing.get_context("spawn")  # CUDA in the parent must not be forked

    def pool(lane: str) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(1, mp_context=context, initializer=_pin, initargs=(lane,), max_tasks_per_child=1)

    pools = {lane: pool(lane) for lane in pinned}
    running: dict[Any, tuple[Trial, str]] = {}

    def start(lane: str) -> None:
        if pending:
            trial = pending.pop()
            running[pools[lane].submit(trial_fn, *trial_args(spec, trial, out))] = (trial, lane)

    try:
        for lane in pinned:
            start(lane)
        while running:
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                trial, lane = running.pop(future)
                try:
                    record = future.result()
                except Exception as e:  # noqa: BLE001  (the worker process died: recorded, the sweep goes on)
                    record = {**trial.as_dict(), "status": "failed", "error": f"{type(e).__name__}: {e}"}
                    pools[lane].shutdown(wait=False)
                    pools[lane] = pool(lane)  # a pool whose worker died takes no more work
                record.update(engine="local", devices=lane)
                on_record(record)
                start(lane)
    finally:
        for pool in pools.values():
            pool.shutdown(wait=not running, cancel_futures=True)


def run_sweep(spec: Spec, out: str | Path, engine: str = "local", address: str | None = None, resume: bool = False,
              retry_failed: bool = False, trial_fn: TrialFn = run_trial,
              log: Callable[[str], None] = lambda m: print(m, flush=True)) -> list[dict[str, Any]]:
    """Run the trials of ``spec`` still to run into ``out``; returns the records written by this call. Ctrl-C
    (KeyboardInterrupt) propagates; every record already written stays."""
    if engine not in ("local", "ray"):
        raise SweepError(f"--engine {engine!r}: use local or ray")
    if spec.early_stop and engine != "ray":
        raise SweepError(f"{spec.path}: early_stop stops trials through Ray Tune: run with --engine ray (or remove "
                         "early_stop)")
    if engine == "ray":
        try:
            import ray  # noqa: F401  (only with --engine ray)
            if spec.early_stop:
                import ray.tune  # noqa: F401
        except ImportError:
            raise SweepError("--engine ray needs Ray (and Ray Tune for early_stop): pip install "
                             "'lm-eval-unlearning[ray]' (or pip install 'ray[tune]')") from None
    pending = prepare(spec, out, resume, retry_failed)
    skipped = len(spec.trials) - len(pending)
    log(f"unlearn sweep: {len(spec.trials)} trials, {skipped} already finished, {len(pending)} to run ({engine})")
    written: list[dict[str, Any]] = []

    def on_record(record: dict[str, Any]) -> None:
        append_record(out, record)
        written.append(record)
        what = "ok" if record["status"] == "ok" else f"FAILED ({record.get('error')})"
        log(f"[{len(written)}/{len(pending)}] {record['id']} {what} in {record.get('wall_s')} s")

    if engine == "local":
        run_local(spec, out, pending, on_record, trial_fn)
    elif pending and spec.early_stop:
        from unlearn_app.sweep.tune_engine import run_tune

        run_tune([(t, trial_args(spec, t, out)) for t in pending], spec.resources, spec.early_stop, out, on_record,
                 address, trial_fn)
    elif pending:
        from unlearn_app.sweep.ray_engine import run_ray

        for wave in waves(pending):  # sequential stages: a wave once the stages before it have ended
            records = read_records(out)
            for trial in wave:
                if (record := blocked(trial, records)) is not None:
                    on_record({**record, "engine": "ray"})
            runnable = [t for t in wave if blocked(t, records) is None]
            if runnable:
                run_ray([(t, trial_args(spec, t, out)) for t in runnable], spec.resources, on_record, address, trial_fn)
    return written
