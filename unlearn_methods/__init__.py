"""Unlearning methods as Hugging Face Trainer losses, and the plain fine-tuning that builds target/retain models."""

from __future__ import annotations

from typing import Any


def all_methods() -> dict[str, type]:
    """Every registered method class by name (the built-in ones are registered on first call: this imports torch
    and transformers; :mod:`unlearn_methods.registry` knows the names without them)."""
    import importlib

    from unlearn_methods.registry import BUILT_IN, METHODS

    for module in sorted(set(BUILT_IN.values())):
        importlib.import_module(module)  # registers its methods
    return METHODS


def check_method(name: str) -> str:
    """The registry key of the method ``name``; ValueError naming the methods when there is none (imports no method
    class, so a mistyped name is refused before torch is imported)."""
    from unlearn_methods.registry import is_method, method_key, method_names

    if not is_method(name):
        raise ValueError(f"Unknown method {name!r}; available: {', '.join(method_names())}.")
    return method_key(name)


def get_method(name: str, params: dict[str, Any] | None = None):
    """An instance of the method ``name`` with ``params`` over its defaults."""
    key = check_method(name)
    METHODS = all_methods()
    if params is not None and not isinstance(params, dict):
        raise ValueError(f"method_params must be a mapping of parameter names to values, got {params!r}.")
    return METHODS[key](params=dict(params or {}))


def describe_methods() -> str:
    """Every method with its summary, paper and hyperparameters (type, default, range, help): `unlearn methods`."""
    from unlearn_methods.params import describe

    lines = []
    for name, cls in sorted(all_methods().items()):
        lines.append(f"{name}: {cls.summary}")
        if cls.paper:
            lines.append(f"    paper: {cls.paper}")
        limits = [text for flag, text in ((cls.qa_only, "questions only (not raw text such as MUSE)"),
                                          (not cls.vision, "not for vision-language models (--data clear)")) if flag]
        if limits:
            lines.append(f"    limits: {'; '.join(limits)}")
        if cls.forget_corpus != "text":
            lines.append(f"    forget corpus: {cls.forget_corpus} (where a source has several: --data rwku)")
        hints = cls.Params.types()
        for f in cls.Params.fields():
            lines.append(f"    --param {f.name}  {describe(f, hints[f.name])}, default {f.default}: {f.metadata['help']}")
        lines.append("")
    return "\n".join(lines).rstrip()
