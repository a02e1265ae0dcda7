"""Settings, declared once and read one way: the typed fields every settings file and option set is declared with
(:func:`param`: default, one line of help, type, range, choices), and the one reader of settings files
(:func:`read_settings`: the sweep spec, the CI suite, ``unlearn run --config``, saved run configurations).

The reader reads YAML with the line of every key and list item, and refuses, in one line naming the file (and the
line), what would silently give a wrong value: a key given twice in any mapping (both lines named), bytes that are
not UTF-8, aliases that expand past :data:`MAX_VALUES` values (an alias bomb), nesting deeper than
:data:`MAX_DEPTH`. Numbers are read as YAML 1.2 reads them (``1e-5`` is a number, as ``1.0e-5`` is; YAML 1.1 read
it as text), so a value means the same in every file and under every key.

A declared section (a dataclass whose fields are :func:`param` fields) is read by :func:`read_section`: unknown
keys, wrong types, values out of range and missing required keys are :class:`Invalid` (the key and what to write);
:meth:`Settings.located` turns that into a :class:`SettingsError` ``FILE:LINE: key: what to fix``. The help of the
fields gives ``--help`` texts, the docs' tables (:func:`markdown_table`) and the messages.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

#: Most values (scalars, list items, mapping keys and values) a settings file may hold once its YAML aliases are
#: expanded (each alias counted again).
MAX_VALUES = 10_000
#: Deepest nesting of mappings and lists a settings file may have.
MAX_DEPTH = 64


# --------------------------------------------------------------------------- declared fields
def param(default: Any, help: str, *, gt: float | None = None, ge: float | None = None, lt: float | None = None,
          le: float | None = None, choices: tuple | None = None, required: bool = False, **extra: Any) -> Any:
    """A setting: its default, one line of help, and the allowed range (bounds or choices); its type is the field's
    annotation (``file_type``: the type a file gives, where the field holds it parsed, e.g. checks as text).
    ``required``: it must be given. ``extra`` goes into the field's metadata too (the run options of
    :mod:`unlearn_methods.config` say there how they appear on the command line). A list or dict default is copied
    for each instance."""
    bounds = {k: v for k, v in (("gt", gt), ("ge", ge), ("lt", lt), ("le", le)) if v is not None}
    metadata = {"help": help, "bounds": bounds, "choices": choices, "required": required, **extra}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


OPS = {"gt": (">", lambda v, b: v > b), "ge": (">=", lambda v, b: v >= b),
       "lt": ("<", lambda v, b: v < b), "le": ("<=", lambda v, b: v <= b)}


def in_range(f: dataclasses.Field, value: Any) -> bool:
    """Whether ``value`` is one of the field's declared choices and within its declared bounds."""
    choices = f.metadata.get("choices")
    if choices and value not in choices:
        return False
    return all(OPS[key][1](value, bound) for key, bound in f.metadata.get("bounds", {}).items())


def allowed(f: dataclasses.Field) -> str:
    """The declared range of a field in words, e.g. ``> 0`` or ``>= 0, <= 1`` or ``one of step, epoch``."""
    if f.metadata.get("choices"):
        return "one of " + ", ".join(map(str, f.metadata["choices"]))
    return ", ".join(f"{OPS[k][0]} {v}" for k, v in f.metadata.get("bounds", {}).items())


def type_name(tp: Any) -> str:
    """``float``, ``int | None``: a type as the methods' tables write it."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if args and typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " | ".join(getattr(a, "__name__", str(a)) for a in args) + (" | None" if allows_none(tp) else "")
    return getattr(tp, "__name__", str(tp))


def describe(f: dataclasses.Field, tp: Any) -> str:
    """``float > 0``: the type and range of a field, for messages and `unlearn methods`."""
    rng = allowed(f)
    return type_name(tp) + (f" {rng}" if rng and not rng.startswith("one of") else f" ({rng})" if rng else "")


def allows_none(tp: Any) -> bool:
    return type(None) in typing.get_args(tp)


def words(hint: Any) -> str:
    """``text``, ``a list of text``, ``text or an object {text: text} or null``: a type as a user reads it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(words(a) for a in args)
    if origin is list:
        if not args:
            return "a list"
        items = typing.get_args(args[0]) if typing.get_origin(args[0]) in (typing.Union, types.UnionType) else args
        inner = [words(a).removeprefix("a ") for a in items]
        return "a list of " + " or ".join(f"{w}{'s' if w.endswith('number') else ''}" for w in inner)
    if origin is dict:
        return "a mapping {" + ": ".join(words(a) for a in args) + "}" if args else "a mapping"
    names = {str: "text", int: "a whole number", float: "a number", bool: "true or false", type(None): "null"}
    return "any value" if hint is Any else names.get(hint, getattr(hint, "__name__", str(hint)))


def matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` (as YAML or JSON gave it) is of the type ``hint`` (a whole number is a number too; true is
    never a number)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, a) for a in args)
    if origin is list:
        return isinstance(value, list) and all(matches(v, args[0]) for v in value) if args else isinstance(value, list)
    if origin is dict or hint is dict:
        return isinstance(value, dict) and (not args or all(
            matches(k, args[0]) and matches(v, args[1]) for k, v in value.items()))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, (str, os.PathLike))  # a Path from Python is a path too
    return isinstance(value, hint) if isinstance(hint, type) else True


# --------------------------------------------------------------------------- errors
class SettingsError(ValueError):
    """A settings file that cannot be used: ``FILE:LINE: key: what to fix`` (the line and key where known)."""

    def __init__(self, where: str, message: str, line: int | None = None, key: str = "") -> None:
        self.where, self.line, self.key, self.message = where, line, key, message
        super().__init__(f"{where}{f':{line}' if line else ''}: {f'{key}: ' if key else ''}{message}")


class Invalid(ValueError):
    """A value that cannot be used, raised where the file is not known: the key (dotted: ``methods.npo.grid``) and
    what to fix. :meth:`Settings.located` adds the file and the line."""

    def __init__(self, key: str, message: str) -> None:
        self.key, self.message = key, message
        super().__init__(f"{key}: {message}" if key else message)


# --------------------------------------------------------------------------- the reader
_FLOAT_1_2 = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X)


class _Loader(yaml.SafeLoader):
    """Safe YAML whose numbers are YAML 1.2's: ``1e-5`` and ``5E3`` are numbers (YAML 1.1 needed a dot)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:float"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_1_2, list("-+0123456789."))


@dataclass
class Settings:
    """A settings file as read: its values (``data``), where it is (``where``, for messages), its text, and the
    line (1-based) of every key and list item by dotted path (``methods.npo.grid.beta``, ``checks.0``)."""

    where: str
    text: str
    data: Any
    lines: dict[str, int] = field(default_factory=dict)

    def line(self, key: str) -> int | None:
        """The line of ``key``, else of the nearest enclosing key that has one."""
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key.rpartition(".")[0]
        return None

    def error(self, key: str, message: str) -> SettingsError:
        return SettingsError(self.where, message, self.line(key), key)

    def located(self, e: Invalid) -> SettingsError:
        """``e`` with this file and the line of its key."""
        return self.error(e.key, e.message)


def read_settings(path: str | Path, what: str = "settings file") -> Settings:
    """Read the settings file at ``path`` (:func:`parse_settings`); a missing or unreadable file is a
    :class:`SettingsError` naming it (``what`` says what it is: "sweep spec", "suite file")."""
    path = Path(path)
    if not path.is_file():
        raise SettingsError(str(path), f"{what} does not exist" if not path.exists() else f"{what} is not a file")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise SettingsError(str(path), f"cannot read the {what}: {e.strerror or e}") from None
    return parse_settings(raw, str(path))


def parse_settings(text: str | bytes, where: str = "<settings>") -> Settings:
    """Parse YAML text (or UTF-8 bytes) into :class:`Settings`, or raise :class:`SettingsError`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            line = text[:e.start].count(b"\n") + 1
            raise SettingsError(where, f"is not UTF-8 text (byte 0x{text[e.start]:02x} at offset {e.start}); save "
                                "it as UTF-8", line) from None
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise SettingsError(where, f"is nested too deeply (at most {MAX_DEPTH} levels of mappings and lists)") \
                from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            raise SettingsError(where, f"is not valid YAML ({getattr(e, 'problem', None) or e})",
                                mark.line + 1 if mark else None) from None
        if node is None:
            return Settings(where, text, None, {})
        lines = _check_nodes(node, where)
        try:
            data = loader.construct_document(node)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            raise SettingsError(where, f"is not valid YAML ({getattr(e, 'problem', None) or e})",
                                mark.line + 1 if mark else None) from None
        except RecursionError:
            raise SettingsError(where, f"is nested too deeply (at most {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()
    return Settings(where, text, data, lines)


def _check_nodes(root: yaml.Node, where: str) -> dict[str, int]:
    """The line of every key and list item by dotted path; refuses duplicate keys, deep nesting and alias bombs.

    Aliases are the same node objects in the composed tree, so each node is walked once, and the expanded size is
    counted with every node's size remembered: an alias bomb costs what its text costs."""
    lines: dict[str, int] = {}
    sizes: dict[int, int] = {}
    seen: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise SettingsError(where, f"is nested too deeply (more than {MAX_DEPTH} levels of mappings and lists)",
                                node.start_mark.line + 1)
        if id(node) in sizes:
            return sizes[id(node)]
        if isinstance(node, yaml.MappingNode):
            total = 1 + sum(size(k, depth + 1) + size(v, depth + 1) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total = 1 + sum(size(v, depth + 1) for v in node.value)
        else:
            total = 1
        sizes[id(node)] = min(total, MAX_VALUES + 1)
        return sizes[id(node)]

    def walk(node: yaml.Node, prefix: str) -> None:
        if id(node) in seen:  # an alias of a node walked already: its keys were checked there
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key, value in node.value:
                line = key.start_mark.line + 1
                name = key.value if isinstance(key, yaml.ScalarNode) else f"<{type(key).__name__}>"
                if name == "<<":  # a merge key (<<: *defaults) adds the keys the mapping does not give itself
                    walk(value, prefix)
                    continue
                path = f"{prefix}.{name}" if prefix else str(name)
                if name in first:
                    raise SettingsError(where, f"given twice (lines {first[name]} and {line}); keep one", line, path)
                first[name] = line
                lines[path] = line
                walk(value, path)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                path = f"{prefix}.{i}" if prefix else str(i)
                lines[path] = item.start_mark.line + 1
                walk(item, path)

    if size(root, 0) > MAX_VALUES:
        line, key = root.start_mark.line + 1, ""
        if isinstance(root, yaml.MappingNode) and root.value:  # the top-level key holding most of it
            k, _ = max(root.value, key=lambda kv: sizes.get(id(kv[1]), 0))
            line, key = k.start_mark.line + 1, str(k.value)
        raise SettingsError(where, f"holds more than {MAX_VALUES} values once its YAML aliases (*name) are "
                            "expanded; write the values out instead of nesting aliases", line, key)
    walk(root, "")
    return lines


# --------------------------------------------------------------------------- declared sections
def declared(cls: type) -> list[dataclasses.Field]:
    """The fields of ``cls`` declared with :func:`param` (the keys of its section; other fields are not read)."""
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


def keys_help(cls: type) -> dict[str, str]:
    """``{key: help}`` of a declared section (its fields in order)."""
    return {f.name: f.metadata["help"] for f in declared(cls)}


def read_section(cls: type, values: Any, key: str = "", *, expected: str = "") -> Any:
    """``values`` (a mapping, or None for all defaults) read into the declared section ``cls`` (a dataclass of
    :func:`param` fields): unknown keys, missing required keys, values of the wrong type and values out of range
    are :class:`Invalid` naming the key (``key`` is where the mapping sits, dotted) and what to write."""
    fields = {f.name: f for f in declared(cls)}
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise Invalid(key, expected or f"expected a mapping with keys {', '.join(fields)}")
    values = dict(values)
    unknown = [k for k in values if k not in fields]
    if unknown:
        raise Invalid(_join(key, unknown[0]), f"unknown key; the keys are {', '.join(fields)}")
    hints = typing.get_type_hints(cls)
    for name, f in fields.items():
        value = values.get(name)
        if value is None:
            if f.metadata.get("required"):
                raise Invalid(_join(key, name), f"missing: {f.metadata['help']}")
            continue
        hint = f.metadata.get("file_type") or hints[name]
        values[name] = value = number_text(value, hint)
        check_value(f, hint, value, _join(key, name))
    return cls(**{k: v for k, v in values.items() if v is not None})


def number_text(value: Any, hint: Any) -> Any:
    """A quoted number (``lr: '1e-4'``) for a number field, read as the number: a number means the same quoted or
    not, as it does on the command line and in ``--param``. Anything else is returned as it is."""
    kinds = set(typing.get_args(hint)) or {hint}
    if not isinstance(value, str) or str in kinds or not kinds & {int, float}:
        return value
    try:
        number = float(value.strip())
    except ValueError:
        return value
    if float in kinds:
        return number
    return int(number) if number.is_integer() else value


def check_value(f: dataclasses.Field, hint: Any, value: Any, key: str) -> None:
    """``value`` is of the field's declared type and within its range, else :class:`Invalid`."""
    if not matches(value, hint):
        raise Invalid(key, f"expected {words(hint)}, got {value!r} ({f.metadata['help']})")
    if isinstance(value, float) and not math.isfinite(value):
        raise Invalid(key, f"expected a finite number, got {value!r}")
    if not isinstance(value, (list, dict)) and not in_range(f, value):
        raise Invalid(key, f"must be {allowed(f)}, got {value!r}")


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else str(name)


def markdown_table(cls: type, title: str = "key", keys: dict[str, str] | None = None) -> list[str]:
    """The declared section ``cls`` as a Markdown table: key, type and range, default, what it holds. ``keys``:
    the key a field is written under, where it is not the field's name (``{field: key}``). A list field's choices
    are those of its items."""
    hints = typing.get_type_hints(cls)
    rows = [f"| {title} | type | default | what it holds |", "|---|---|---|---|"]
    for f in declared(cls):
        default = ("required" if f.metadata.get("required") else
                   repr(f.default_factory()) if f.default_factory is not dataclasses.MISSING else repr(f.default))
        hint = f.metadata.get("file_type") or hints[f.name]
        rng = allowed(f)
        if rng and f.metadata.get("choices") and typing.get_origin(hint) is list:
            rng = "each " + rng
        kind = words(hint) + (f" ({rng})" if rng else "")
        key = (keys or {}).get(f.name, f.name)
        rows.append(f"| `{key}` | {_cell(kind)} | `{_cell(default)}` | {_cell(f.metadata['help'])} |")
    return rows


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
