"""What the ``lm_eval`` command is doing while it starts, said before lm-eval's own first line.

A bare ``lm_eval`` run imports torch, transformers and lm-eval's evaluator, then indexes every task YAML lm-eval
ships (about 15,000 entries), then loads the model and the tasks' documents: on a busy 2-core machine the first of
these steps left the command silent for minutes. The start-up hook (:mod:`harness_ext.autoload`), the task manager
patch (:mod:`harness_ext.lm_eval_patches`) and our tasks' document loading (:mod:`harness_ext.task_base`) log each
step here, at INFO on a child of lm-eval's ``lm_eval`` logger: the ``lm_eval`` command shows the lines in its own
format, its ``--verbosity`` / ``LMEVAL_LOG_LEVEL`` hides them, and a program that has not set lm-eval's logging up
(``simple_evaluate``, the ``unlearn`` commands) sees nothing. Standard library only: the start-up hook imports it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator

#: The logger of these lines: lm-eval's handler shows it as ``[lm_eval_unlearning:LINE]``.
LOGGER = "lm_eval.lm_eval_unlearning"
log = logging.getLogger(LOGGER)


def say(message: str, *args: object) -> None:
    """Log one start-up step."""
    log.info(message, *args)


@contextlib.contextmanager
def step(message: str, done: Callable[[float], str]) -> Iterator[None]:
    """Log ``message`` before the step and ``done(seconds)`` after it (nothing after a failed step)."""
    log.info(message)
    start = time.perf_counter()
    yield
    log.info(done(time.perf_counter() - start))
