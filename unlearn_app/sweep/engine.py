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
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness_ext.results import json_safe
from unlearn_app.sweep.spec import Spec, Trial
from unlearn_app.sweep.trial import run_trial

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
    return (trial.as_dict(), spec.trial_config(trial, folder / "model"), [c.text for c in spec.evaluation.checks],
            spec.evaluation.baseline, str(folder), int(spec.resources["cpus"]), spec.attacks)


def run_local(spec: Spec, out: str | Path, trials: list[Trial], on_record: Callable[[dict], None],
              trial_fn: TrialFn = run_trial) -> None:
    """The default engine: one trial at a time, in this process."""
    for trial in trials:
        record = trial_fn(*trial_args(spec, trial, out))
        record["engine"] = "local"
        on_record(record)


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

        run_ray([(t, trial_args(spec, t, out)) for t in pending], spec.resources, on_record, address, trial_fn)
    return written
