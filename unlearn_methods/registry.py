"""The method registry: a new method is one small class plus one ``@register`` line."""

from __future__ import annotations

from unlearn_methods.base import UnlearnMethod

METHODS: dict[str, type[UnlearnMethod]] = {}


def register(cls: type[UnlearnMethod]) -> type[UnlearnMethod]:
    """Class decorator adding a method under its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} needs a name")
    if cls.name in METHODS:
        raise ValueError(f"method {cls.name!r} is registered twice")
    METHODS[cls.name] = cls
    return cls
