"""Our tasks' input errors (bad data, reference, options) end the ``lm_eval`` command with one ``error:`` line and
exit status 2, as the ``unlearn`` commands end on bad input, instead of a traceback and 1 (``UNLEARN_TRACEBACK=1``
shows the traceback)."""

from __future__ import annotations

import atexit
import functools
import os
import sys
from pathlib import Path

_OURS = tuple(str(Path(__file__).resolve().parent.parent / p) + os.sep for p in ("harness_ext", "unlearn_tasks"))
TRACEBACK_ENV = "UNLEARN_TRACEBACK"


def is_input_error(exc: BaseException) -> bool:
    """A ValueError raised by this package's own code: a message written for the user (data, reference, options)."""
    if not isinstance(exc, ValueError) or exc.__traceback__ is None:
        return False
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_OURS)


def _excepthook(exc_type, exc, tb, previous=sys.excepthook) -> None:
    if is_input_error(exc) and os.environ.get(TRACEBACK_ENV, "0") in ("", "0"):
        print(f"error: {exc}\n(set {TRACEBACK_ENV}=1 for the traceback)", file=sys.stderr)
        # Python exits 1 after an uncaught exception; bad input exits 2: the exit handlers run, the streams are
        # flushed, then the process ends with 2 (the exception was raised before anything was evaluated).
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(2)
    previous(exc_type, exc, tb)


def install_input_error_hook() -> None:
    """Make an uncaught input error of our tasks print one line (called when one of our tasks is built, so only
    processes that run our tasks are affected; exceptions still propagate to Python callers as usual)."""
    if not getattr(sys.excepthook, "_unlearn_input_errors", False):
        hook = functools.partial(_excepthook, previous=sys.excepthook)
        hook._unlearn_input_errors = True  # type: ignore[attr-defined]
        sys.excepthook = hook
