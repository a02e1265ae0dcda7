"""The method registry: a new method is one small class plus one ``@register`` line, and its name in
:data:`BUILT_IN`.

Importing this module is light (no torch, no transformers): a method's name is checked here without importing the
method classes, so a mistyped ``--method`` or spec key is refused in about a second; the classes are imported (and
register themselves) only when a run needs them (:func:`unlearn_methods.all_methods`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from unlearn_methods.base import UnlearnMethod

#: Every built-in method's name -> the module whose ``@register`` lines register it (importing that module
#: registers the class). ``tests/unlearn_methods/test_registry.py`` checks that it equals the registered classes.
BUILT_IN: dict[str, str] = {name: "unlearn_methods.methods" for name in (
    "altpo", "ceu", "dpo", "ga", "graddiff", "idk", "kl", "llmu", "npo", "pdu", "retain_ft", "rmu", "satimp",
    "scrub", "simnpo", "task_vector", "undial", "wga", "whp")}

METHODS: dict[str, type[UnlearnMethod]] = {}


def register(cls: type[UnlearnMethod]) -> type[UnlearnMethod]:
    """Class decorator adding a method under its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} needs a name")
    if cls.name in METHODS:
        raise ValueError(f"method {cls.name!r} is registered twice")
    METHODS[cls.name] = cls
    return cls


def method_key(name: str) -> str:
    """The registry key of a method name as a user writes it (lower case, ``-`` as ``_``: ``Retain-FT`` ->
    ``retain_ft``)."""
    return name.lower().replace("-", "_")


def method_names() -> list[str]:
    """Every method's name, sorted: the built-in ones and any registered since, without importing a class."""
    return sorted(set(BUILT_IN) | set(METHODS))


def is_method(name: str) -> bool:
    """Whether ``name`` (as a user writes it) names a method; imports no method class."""
    return method_key(name) in BUILT_IN or method_key(name) in METHODS
