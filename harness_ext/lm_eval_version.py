"""Which line of lm-eval is installed: 0.4.13 (the pinned, tested line) or the 0.5 development line (0.5.0.dev1).

Read from the installed distribution's metadata, without importing lm-eval. Every module of :mod:`harness_ext` that
does one thing two ways branches on :data:`LM_EVAL_05`; nothing above ``harness_ext`` asks which line it runs on.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from packaging.version import Version


def lm_eval_version() -> Version | None:
    """The installed lm-eval's version, or None when lm-eval is not installed."""
    try:
        return Version(version("lm_eval"))
    except PackageNotFoundError:
        return None


#: True on lm-eval's 0.5 line (its development releases included), False on 0.4.x.
LM_EVAL_05: bool = (lm_eval_version() or Version("0")) >= Version("0.5.0.dev0")
