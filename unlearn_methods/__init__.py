"""Unlearning methods as Hugging Face Trainer losses, and the plain fine-tuning that builds target/retain models."""

from __future__ import annotations

from typing import Any


def all_methods() -> dict[str, type]:
    """Every registered method class by name (the built-in ones are registered on first call)."""
    from unlearn_methods import methods  # noqa: F401  (registers the built-in methods)
    from unlearn_methods.registry import METHODS

    return METHODS


def get_method(name: str, params: dict[str, Any] | None = None):
    """An instance of the method ``name`` with ``params`` over its defaults."""
    METHODS = all_methods()
    key = name.lower().replace("-", "_")
    if key not in METHODS:
        raise ValueError(f"Unknown method {name!r}; available: {', '.join(sorted(METHODS))}.")
    return METHODS[key](params=dict(params or {}))
