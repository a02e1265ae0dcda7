"""Typed method hyperparameters: each method declares a small dataclass of them (type, default, allowed range, one
line of help; :func:`unlearn_tasks.settings.param`, the declaration every setting uses), the way TRL's trainer configs
do. Values from ``--param KEY=VALUE`` (strings) and from settings files (read by :mod:`unlearn_tasks.settings`) are
converted to the declared type and checked against the
declared range before training starts; a bad value raises :class:`ParamError` naming the parameter, the value and
what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from typing import Any

from unlearn_tasks.settings import OPS as _OPS
from unlearn_tasks.settings import allowed, describe, in_range, param, type_name  # noqa: F401 (the methods' names)
from unlearn_tasks.settings import allows_none as _allows_none

TRUE, FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}
#: The largest seed every seeded library accepts (numpy's seeds are 0 .. 2**32 - 1; torch and Python take more).
MAX_SEED = 2**32 - 1


def option(default: Any, help: str, *, flag: str | None = "", negative: tuple[str, str] | None = None,
           inverted: bool = False, repeat: bool = False, metavar: str | None = None, default_text: str | None = None,
           unit: str | None = None, required: bool = False, resume: bool = False, path: bool = False,
           **bounds: Any) -> Any:
    """A run option, declared once: the field's type (its annotation), default, help and range (``gt``, ``ge``,
    ``lt``, ``le``, ``choices``: the metadata of :func:`param`), and

    - ``flag``: its command-line flag (default ``--`` + the name with dashes; None: YAML only); ``negative``:
      ``(flag, help)`` of the flag that sets a bool option False (``--full``); ``inverted``: the flag sets it False
      (``--quiet`` sets ``progress``); ``repeat``: the flag may be given several times (a list; a dict from
      ``KEY=VALUE`` items, where a dict option given once is a JSON object); ``metavar``; ``default_text``: the
      default in words for ``--help`` when it is computed (e.g. the retain split of the forget split);
    - ``unit``: what a positive number counts, for the error message; ``required``;
    - ``resume``: ``--resume`` continues a run only if this option is the same; ``path``: a local path (saved
      relative to the checkpoint folder).
    """
    return param(default, help, flag=flag, negative=negative, inverted=inverted, repeat=repeat, metavar=metavar,
                 default_text=default_text, unit=unit, required=required, resume=resume, path=path, **bounds)


class ParamError(ValueError):
    """A method hyperparameter is unknown, of the wrong type or out of its range."""


@dataclass
class MethodParams:
    """Base of every method's hyperparameter dataclass (a method without hyperparameters uses it as it is)."""

    @classmethod
    def fields(cls) -> list[dataclasses.Field]:
        return list(dataclasses.fields(cls))

    @classmethod
    def types(cls) -> dict[str, Any]:
        return typing.get_type_hints(cls)

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None, method: str = "") -> MethodParams:
        """Parse and validate ``values`` for ``method`` (missing keys take their defaults); raise
        :class:`ParamError` if one is unknown, of the wrong type or out of range."""
        values = dict(values or {})
        names = [f.name for f in cls.fields()]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ParamError(f"Method {method!r} has no parameter(s) {unknown}; it takes {names or 'none'} "
                             f"(`unlearn methods` lists them).")
        hints = cls.types()
        parsed = {name: _convert(method, name, value, hints[name]) for name, value in values.items()}
        params = cls(**parsed)
        params.validate(method)
        return params

    def validate(self, method: str = "") -> None:
        """Check every value against its declared type and range."""
        hints = self.types()
        for f in self.fields():
            value = getattr(self, f.name)
            if value is None:
                if not _allows_none(hints[f.name]):
                    raise ParamError(_bad(method, f.name, value, describe(f, hints[f.name])))
                continue
            choices = f.metadata.get("choices")
            if choices and value not in choices:
                raise ParamError(_bad(method, f.name, value, f"one of {', '.join(map(str, choices))}"))
            for key, bound in f.metadata.get("bounds", {}).items():
                if not _OPS[key][1](value, bound):
                    raise ParamError(_bad(method, f.name, value, describe(f, hints[f.name])))
            if isinstance(value, float) and not math.isfinite(value):
                raise ParamError(_bad(method, f.name, value, "a finite number"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _bad(method: str, name: str, value: Any, what: str) -> str:
    return f"Method {method!r}: parameter {name}={value!r} is not allowed; expected {what}."


def _base_type(tp: Any) -> type:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(tp) if a is not type(None))
    return tp


def _convert(method: str, name: str, value: Any, tp: Any) -> Any:
    """``value`` as the declared type ``tp`` (strings parsed: '5e-2' -> 0.05, 'true' -> True, 'none' -> None)."""
    base = _base_type(tp)

    def bad() -> ParamError:
        return ParamError(_bad(method, name, value, type_name(tp)))

    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null", "~") and base is not str):
        if _allows_none(tp):
            return None
        raise bad()
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in TRUE | FALSE:
            return value.strip().lower() in TRUE
        raise bad()
    if base is str:
        if isinstance(value, (dict, list)):
            raise bad()
        return str(value)
    if isinstance(value, bool):  # True is an int in Python; never a number here
        raise bad()
    if base is float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise bad() from None
    if base is int:
        if isinstance(value, int):
            return value
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise bad() from None
        if not number.is_integer():
            raise bad()
        return int(number)
    raise bad()
