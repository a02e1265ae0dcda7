"""``unlearn`` commands under ``accelerate launch``: the launch command for several processes, and the one case where
accelerate starts fewer processes than asked.

``accelerate launch --cpu --num_processes N`` (accelerate 1.x) starts **one** process whatever N is: its ``--cpu``
path is the single-process launcher, which only sets ``MASTER_ADDR`` for the N processes it never starts. A run
would then train alone with ``--batch-size`` rows per step instead of N times as many, and end in other weights
than the N processes asked for. :func:`relaunch_cpu_processes` starts the N processes through accelerate's own
multi-process launcher (``ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes N``, CPU processes
meeting over gloo), so both spellings train alike."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence

#: Variables a launcher of several processes sets in each of them (torchrun, mpirun, Intel MPI, MVAPICH).
_SEVERAL = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def launch_command(processes: int, port: int | str, args: Sequence[str], mixed_precision: str = "no",
                   threads: int | str | None = None) -> list[str]:
    """``accelerate launch`` of ``unlearn ARGS`` in ``processes`` processes on this machine (one per GPU, or CPU
    processes over gloo when ``ACCELERATE_USE_CPU=true`` is in the environment), meeting on ``port``."""
    command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
               "--num_machines", "1", "--mixed_precision", mixed_precision, "--dynamo_backend", "no",
               "--main_process_port", str(port)]
    if threads is not None:
        command += ["--num_cpu_threads_per_process", str(threads)]
    return [*command, "-m", "unlearn_app", *args]


def launcher_arguments(cmdline: Sequence[str]) -> list[str] | None:
    """The options of an ``accelerate launch`` command line (``accelerate launch``, ``accelerate-launch``,
    ``python -m accelerate.commands.launch``), from its first option on; None for any other command."""
    for i, word in enumerate(cmdline):
        name = os.path.basename(word)
        if name in ("accelerate-launch", "accelerate.commands.launch"):
            return list(cmdline[i + 1:])
        if name in ("accelerate", "accelerate.commands.accelerate_cli") and cmdline[i + 1:i + 2] == ["launch"]:
            return list(cmdline[i + 2:])
    return None


def cpu_processes_asked(environ: Mapping[str, str], parent_cmdline: Sequence[str]) -> int | None:
    """N when this process is the only one ``accelerate launch --cpu --num_processes N`` (N > 1, one machine)
    started, given this process's environment and its parent's command line; else None."""
    if environ.get("ACCELERATE_USE_CPU", "").lower() not in ("true", "1", "yes") or "MASTER_ADDR" not in environ:
        return None
    if any(name in environ for name in _SEVERAL):
        return None
    options = launcher_arguments(parent_cmdline)
    if options is None:
        return None
    from accelerate.commands.launch import launch_command_parser

    try:
        launched, _ = launch_command_parser().parse_known_args(options)
    except SystemExit:  # not a command line accelerate itself accepted
        return None
    several = launched.num_processes is not None and launched.num_processes > 1
    one_machine = launched.num_machines in (None, 1) and getattr(launched, "mpirun_hostfile", None) is None
    return launched.num_processes if launched.cpu and several and one_machine else None


def _parent_cmdline() -> list[str]:
    try:
        import psutil  # a dependency of accelerate

        return psutil.Process(os.getppid()).cmdline()
    except Exception:  # no such process or no access: not started by a launcher we can read
        return []


def relaunch_cpu_processes(argv: Sequence[str], problem: Callable[[], str | None] | None = None) -> str | None:
    """When this process is the only one ``accelerate launch --cpu --num_processes N`` started, replace it by
    accelerate's launch of ``unlearn ARGV`` in N CPU processes (same port, precision and threads); else return None.
    ``problem``: the command's own check of its options (what is wrong, in one line, or None), run here first: a bad
    option is then refused once, by this one process, before the N start, and its message is returned (the caller
    prints it and exits 2; accelerate's launcher then reports the failed command)."""
    if os.environ.get("ACCELERATE_USE_CPU", "").lower() not in ("true", "1", "yes"):
        return None  # the common case, decided without reading the parent process
    processes = cpu_processes_asked(os.environ, _parent_cmdline())
    if processes is None:
        return None
    if problem is not None and (found := problem()):
        return found
    env = {**os.environ, "ACCELERATE_USE_CPU": "true"}
    command = launch_command(processes, env.get("MASTER_PORT", "29500"), argv,
                             mixed_precision=env.get("ACCELERATE_MIXED_PRECISION", "no"),
                             threads=env.get("OMP_NUM_THREADS"))
    print(f"note: accelerate launch --cpu started one process for --num_processes {processes}; starting the "
          f"{processes} CPU processes (as ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes "
          f"{processes})", file=sys.stderr, flush=True)
    os.execve(sys.executable, command, env)
    return None  # not reached: the N processes replace this one
