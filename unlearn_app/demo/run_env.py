"""How the demos run: reproducibly (one CPU thread, torch's deterministic algorithms) and quietly (the Trainer's
loss lines and checkpoint messages go to a file in the demo's folder; the terminal shows the stages and tables).

Why one thread: a float32 sum split over several threads can be added in another order, so its last bits can
depend on the thread count; forty epochs of training amplify those bits into different tables. With one thread the
tables depend only on the CPU's kernels (torch picks AVX2 or AVX-512 code by the CPU), as docs/demo.md says.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

#: The file in the demo's folder the training logs are appended to.
TRAINING_LOG = "training_log.txt"


@contextlib.contextmanager
def reproducible(threads: int = 1) -> Iterator[None]:
    """Run the block with ``threads`` intra-op threads and deterministic algorithms; both restored afterwards."""
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # what deterministic cuBLAS needs on a GPU
    before = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.set_num_threads(before[0])
        torch.use_deterministic_algorithms(before[1])


@contextlib.contextmanager
def training_log(workdir: Path) -> Iterator[None]:
    """What the block prints to stdout (the Trainer's log lines) appended to ``workdir/training_log.txt``."""
    with (workdir / TRAINING_LOG).open("a", buffering=1) as log, contextlib.redirect_stdout(log):  # tail -f works
        yield


class _DropMessage(logging.Filter):
    def __init__(self, start: str) -> None:
        super().__init__()
        self.start = start

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.start)


@contextlib.contextmanager
def without_warning(logger: str, start: str) -> Iterator[None]:
    """The block without the log records of ``logger`` whose message template starts with ``start``."""
    drop, target = _DropMessage(start), logging.getLogger(logger)
    target.addFilter(drop)
    try:
        yield
    finally:
        target.removeFilter(drop)
