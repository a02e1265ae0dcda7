"""Running a sweep: the output folder, the results stream (``trials.jsonl``, one line per finished trial, flushed as
it ends), ``--resume``, and the default engine (trials one after another on this machine).

Layout of ``--out DIR``::

    DIR/spec.yaml              the spec as given (the last run's)
    DIR/trials.jsonl           one JSON record per finished trial (ok or failed); a rerun's record comes later
    DIR/trials/<id>/           trial.json (its options), model/ (the `unlearn run --out`, with eval/), error.txt;
                               run.yaml and launch.log for a trial of several processes
    DIR/leaderboard.{md,json,html,png}
    DIR/.sweep.lock            the OS lock of the sweep running on DIR (one at a time)
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from harness_ext.results import json_safe
from unlearn_app.sweep.spec import Spec, Trial
from unlearn_app.sweep.trial import CHECKPOINT, run_trial, trial_options
from unlearn_app.sweep.validate import check_results_names

TRIALS_FILE = "trials.jsonl"
LOCK_FILE = ".sweep.lock"
#: What a sweep folder holds (besides the temporaries of the leaderboard's files, which start with a dot).
LAYOUT = {"spec.yaml", TRIALS_FILE, "trials", "leaderboard.md", "leaderboard.json", "leaderboard.html",
          "leaderboard.png", "ray-tune", LOCK_FILE}
STATUSES = ("ok", "failed", "stopped")
TrialFn = Callable[..., dict[str, Any]]


class SweepError(ValueError):
    """The sweep cannot start (output folder, engine); the message says what to fix."""


# --------------------------------------------------------------------------- the results stream
def _lines(path: Path) -> tuple[list[bytes], bytes]:
    """The complete lines of ``path`` (each ended by a newline) and the unfinished tail after the last one."""
    data = path.read_bytes() if path.is_file() else b""
    *complete, tail = data.split(b"\n")
    return complete, tail


def _record(line: bytes, path: Path, number: int) -> dict[str, Any] | None:
    """One line of ``trials.jsonl`` as a record (None for a blank line); :class:`SweepError` names a bad line."""
    where = f"{path}: line {number}"
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise SweepError(f"{where}: not UTF-8; the file is damaged: remove that line (its trial reruns with "
                         "--resume)") from None
    if not text.strip():
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        raise SweepError(f"{where}: not JSON ({e.msg}); remove that line (its trial reruns with --resume)") from None
    if not (isinstance(record, dict) and isinstance(record.get("id"), str) and record.get("status") in STATUSES):
        raise SweepError(f"{where}: not a trial record (an object with an id and a status of "
                         f"{', '.join(STATUSES)}); remove that line (its trial reruns with --resume)")
    return record


def read_records(out: str | Path) -> dict[str, dict[str, Any]]:
    """The newest record of every trial in ``out/trials.jsonl``. A last line without its newline was cut by a
    crash while it was written: it is ignored (its trial reruns with ``--resume``) unless it is a whole record.
    Any other line that is not a record stops with :class:`SweepError` naming it."""
    path = Path(out) / TRIALS_FILE
    complete, tail = _lines(path)
    records: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(complete, 1):
        if (record := _record(line, path, number)) is not None:
            records[record["id"]] = record
    try:
        last = _record(tail, path, len(complete) + 1)
    except SweepError:
        last = None
    if last is not None:
        records[last["id"]] = last
    return records


def _repair(path: Path) -> None:
    """End ``path`` with a newline: a cut last line (a crash while it was written) is removed, a whole record
    without its newline gets one; the next record then starts a line of its own."""
    complete, tail = _lines(path)
    if not tail:
        return
    try:
        whole = _record(tail, path, len(complete) + 1) is not None
    except SweepError:
        whole = False
    with open(path, "r+b") as f:
        if whole:
            f.seek(0, os.SEEK_END)
            f.write(b"\n")
        else:
            f.truncate(sum(len(line) + 1 for line in complete))
        f.flush()
        os.fsync(f.fileno())


def append_record(out: str | Path, record: dict[str, Any]) -> None:
    """One line in ``out/trials.jsonl``, on disk before this returns (on a line of its own, whatever a crash left)."""
    path = Path(out) / TRIALS_FILE
    _repair(path)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(json_safe(record), sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


# --------------------------------------------------------------------------- the folder
_held: dict[Path, tuple[int, Any]] = {}  # folder -> (pid, open lock file) of the locks this process holds


@contextlib.contextmanager
def hold(out: str | Path) -> Iterator[None]:
    """Hold the sweep folder ``out`` (an OS lock on ``out/.sweep.lock``, released when the process ends, however it
    ends) while the block runs; a second sweep on the folder gets :class:`SweepError`. Re-entrant in one process."""
    out = Path(out).resolve()
    held = _held.get(out)
    if held and held[0] == os.getpid():
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    f = open(out / LOCK_FILE, "a+")
    _take(f, out)
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} on {socket.gethostname()}")
    f.flush()
    _held[out] = (os.getpid(), f)
    try:
        yield
    finally:
        del _held[out]
        f.close()  # closing the file releases the lock


def check_free(out: str | Path) -> None:
    """Refuse a folder another sweep holds (its lock taken), creating nothing: called before the spec is read and
    anything heavy is imported, so a second sweep on a busy folder is refused in about a second. :func:`hold`
    takes the lock for good."""
    out = Path(out).resolve()
    held = _held.get(out)
    if (held and held[0] == os.getpid()) or not (out / LOCK_FILE).is_file():
        return
    with open(out / LOCK_FILE, "a+") as f:
        _take(f, out)  # released when the file closes


def _take(f: Any, out: Path) -> None:
    """Take the lock on the open lock file ``f`` of ``out``, or close it and raise :class:`SweepError` naming its
    holder."""
    try:
        _lock(f)
    except OSError:
        f.seek(0)
        owner = f.read().strip()
        f.close()
        raise SweepError(f"--out {out} is in use by another unlearn sweep{f' ({owner})' if owner else ''}; wait for "
                         "it to end (then continue with --resume), or choose another --out") from None


def _lock(f: Any) -> None:
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)
        return
    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def _is_sweep_spec(path: Path) -> bool:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and "methods" in data


def check_folder(spec: Spec, out: str | Path, resume: bool, existing: bool = False) -> None:
    """Refuse, before anything is written, an ``out`` that is not this sweep's folder: a file; without ``resume``
    a non-empty folder; with it a folder that is not a sweep (a model, data) or holds another sweep (no trial of
    ``spec`` in it). ``existing``: the sweep must already be there (``--leaderboard-only``)."""
    out = Path(out)
    if not check_layout(spec.path, out, resume, existing):
        return
    ids = {t.id for t in spec.trials}
    ran = set(read_records(out)) | ({p.name for p in (out / "trials").iterdir()} if (out / "trials").is_dir() else set())
    if ran and not ran & ids:
        raise SweepError(f"--out {out} holds another sweep: none of its {len(ran)} trials is a trial of {spec.path} "
                         "(a spec whose every trial changed is a new sweep); give that sweep's spec, or another --out")


def check_layout(spec_path: str | Path, out: str | Path, resume: bool, existing: bool = False) -> bool:
    """The part of :func:`check_folder` that needs no spec read (so it comes before the methods, and torch, are
    imported): ``out`` is not a file, is empty unless ``resume``, and then holds a sweep. Returns whether it holds
    one (whose trials :func:`check_folder` then compares with the spec's)."""
    out = Path(out)
    if out.is_file():
        raise SweepError(f"--out {out} is a file; give a folder")
    names = sorted(p.name for p in out.iterdir() if p.name != LOCK_FILE) if out.is_dir() else []
    if not names:
        if existing:
            raise SweepError(f"--out {out}: no sweep there ({'an empty folder' if out.is_dir() else 'no such folder'}); "
                             f"run it first with unlearn sweep {spec_path} --out {out}")
        return False
    if not resume and not existing:
        held = "a sweep (trials.jsonl); pass --resume to continue it" if TRIALS_FILE in names else "files"
        raise SweepError(f"--out {out} is not empty: it holds {held}, or choose an empty --out")
    foreign = [n for n in names if n not in LAYOUT and not n.startswith(".leaderboard")]
    spec_file = out / "spec.yaml"
    if not foreign and spec_file.exists() and not _is_sweep_spec(spec_file):
        foreign = ["a spec.yaml that is not a sweep spec"]
    if foreign or not (spec_file.exists() or TRIALS_FILE in names):
        shown = ", ".join(foreign[:4]) + (" ..." if len(foreign) > 4 else "") if foreign else "no spec.yaml, no trials.jsonl"
        raise SweepError(f"--out {out}: no sweep there: it is not a sweep folder (it holds {shown}); give the folder "
                         "of this sweep, or an empty --out")
    return True


def prepare(spec: Spec, out: str | Path, resume: bool = False, retry_failed: bool = False) -> list[Trial]:
    """Check ``out`` (:func:`check_folder`) and return the trials still to run (all of them, or with ``resume``
    those without a record; failed ones too with ``retry_failed``; a trial stopped early by ``early_stop`` is
    finished). Call it holding the folder (:func:`hold`)."""
    out = Path(out)
    check_folder(spec, out, resume)
    out.mkdir(parents=True, exist_ok=True)
    done = read_records(out) if resume else {}
    (out / "spec.yaml").write_text(spec.text, encoding="utf-8")
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


def check_gpus(spec: Spec) -> None:
    """The default engine: a trial of ``resources.gpus`` 2 or more needs that many GPUs here; without them it would
    launch as many CPU processes, each taking a batch of every step (a larger effective batch), unannounced."""
    wanted = spec.resources["gpus"]
    if wanted < 2:
        return
    found = len(visible_gpus())
    if found < wanted:
        raise SweepError(f"{spec.path}: resources.gpus is {wanted:g}, but this machine has {found or 'no'} GPU"
                         f"{'' if found == 1 else 's'} visible; run it where {wanted:g} are, or for {wanted:g} CPU "
                         f"processes write resources: {{gpus: 0, processes: {wanted:g}}} (each takes a batch of every "
                         "step)")


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
        record = blocked(trial, records) or trial_fn(*trial_args(spec, trial, out), **trial_options(spec.resources))
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
            running[pools[lane].submit(trial_fn, *trial_args(spec, trial, out), **trial_options(spec.resources))] = \
                (trial, lane)

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


@contextlib.contextmanager
def stop_on_ctrl_c() -> Iterator[dict[str, bool]]:
    """Ctrl-C (SIGINT) while the block runs sets ``hit`` and raises KeyboardInterrupt where Python is. Code that
    swallows that exception (a library turning it into an error, a finaliser, where Python only prints "Exception
    ignored") cannot hide it: the sweep looks at ``hit`` after every trial and stops there. The previous handler
    comes back after the block. Outside the main thread (no signal handlers there) Ctrl-C is Python's own."""
    state = {"hit": False}
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def handler(signum: int, frame: Any) -> None:
        state["hit"] = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, previous)


def run_sweep(spec: Spec, out: str | Path, engine: str = "local", address: str | None = None, resume: bool = False,
              retry_failed: bool = False, trial_fn: TrialFn | None = None,
              log: Callable[[str], None] = lambda m: print(m, flush=True)) -> list[dict[str, Any]]:
    """Run the trials of ``spec`` still to run into ``out`` (held: a second sweep on it is refused); returns the
    records written by this call. Ctrl-C stops the sweep (KeyboardInterrupt), even where a trial or a finaliser
    swallowed it: the trial it interrupted gets no record (``--resume`` reruns it); every record already written
    stays."""
    trial_fn = trial_fn or run_trial
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
    elif (cores := os.cpu_count() or 1) < spec.resources["cpus"]:
        raise SweepError(f"{spec.path}: resources.cpus is {spec.resources['cpus']:g}, but this machine has {cores} "
                         "cores (the default engine runs each trial with resources.cpus threads)")
    else:
        check_gpus(spec)
    check_folder(spec, out, resume)  # before the lock file is written into a folder that is not a sweep
    with hold(out), stop_on_ctrl_c() as ctrl_c:
        return _run_held(spec, out, engine, address, resume, retry_failed, trial_fn, log, ctrl_c)


def _run_held(spec: Spec, out: str | Path, engine: str, address: str | None, resume: bool, retry_failed: bool,
              trial_fn: TrialFn, log: Callable[[str], None], ctrl_c: dict[str, bool]) -> list[dict[str, Any]]:
    pending = prepare(spec, out, resume, retry_failed)
    skipped = len(spec.trials) - len(pending)
    log(f"unlearn sweep: {len(spec.trials)} trials, {skipped} already finished, {len(pending)} to run ({engine})")
    written: list[dict[str, Any]] = []
    checked: list[str] = []

    def on_record(record: dict[str, Any]) -> None:
        if ctrl_c["hit"]:  # the trial ran under Ctrl-C: not finished, whatever it returned
            raise KeyboardInterrupt(f"Ctrl-C during trial {record.get('id')}")
        append_record(out, record)
        written.append(record)
        what = "ok" if record["status"] == "ok" else f"FAILED ({record.get('error')})"
        log(f"[{len(written)}/{len(pending)}] {record['id']} {what} in {record.get('wall_s')} s")
        if record["status"] == "ok" and not checked:  # names only a trial's results can tell, after the first
            checked.append(record["id"])
            check_results_names(spec, record.get("metrics") or {})

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
    if ctrl_c["hit"]:
        raise KeyboardInterrupt("Ctrl-C")
    return written
