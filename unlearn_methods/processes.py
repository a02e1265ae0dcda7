"""The processes of one run under a launcher (``accelerate launch``, ``torchrun``; one process without): which one
writes, and work done once on the main process with its result, or its error, shared with the others through
accelerate's collectives (no layer of our own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch
from accelerate import PartialState
from accelerate.utils import broadcast_object_list

T = TypeVar("T")


class MainProcessError(RuntimeError):
    """The work done on the main process failed; every process raises it with the main process's message."""


def main_process() -> PartialState:
    """The processes of this run (one without a launcher): ``.is_main_process`` writes, ``.wait_for_everyone()``."""
    return PartialState(cpu=not torch.cuda.is_available())  # processes on CPUs meet over gloo


def on_main_process(work: Callable[[], T], errors: tuple[type[BaseException], ...] = (Exception,)) -> T:
    """``work()`` run on the main process only, its result given to every process (the others wait for it). If it
    raises one of ``errors``, every process raises :class:`MainProcessError` with its message (chained on the main
    process), so no process is left waiting for the others."""
    procs = main_process()
    if procs.num_processes == 1:
        return work()
    result: Any = None
    failure: str | None = None
    caught: BaseException | None = None
    if procs.is_main_process:
        try:
            result = work()
        except errors as e:
            caught, failure = e, str(e)
    result, failure = broadcast_object_list([result, failure])
    if failure is not None:
        raise MainProcessError(failure) from caught
    return result

