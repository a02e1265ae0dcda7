"""``unlearn run``: train an unlearning method on a forget split and write the checkpoint.

Its flags, the defaults ``--help`` shows and the values handed to :func:`unlearn_methods.config.load_run_config` are
derived from the fields of :class:`unlearn_methods.config.RunConfig` (see :func:`unlearn_methods.config.option`);
nothing here names a run option."""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from typing import Any

from unlearn_app import output_guard
from unlearn_app.commands import error, model_problem

ORDER = 20


def _run_config(args: argparse.Namespace) -> Any:
    """The run's :class:`~unlearn_methods.config.RunConfig` from ``--config`` and the flags, every option checked
    before the training stack (torch, transformers) is imported, so errors come at once; a ValueError naming what to
    fix."""
    from unlearn_methods.config import load_run_config, read_config_file

    overrides = option_values(args)
    params = overrides.pop("method_params", None)  # --param goes over the config file's method_params
    model = overrides.get("model") or (read_config_file(args.config).get("model") if args.config else None)
    if isinstance(model, str) and (problem := model_problem(model)):  # before the method's class (torch) is imported
        raise ValueError(problem)
    return load_run_config(args.config, params=params, **overrides)


def _launch_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options, checked once by the one process ``accelerate launch --cpu`` starts, before it
    starts the N (:func:`unlearn_app.launch.relaunch_cpu_processes`): the run's options and the method's
    hyperparameters (whose classes import torch), which each of the N processes would otherwise refuse in turn."""
    from unlearn_methods.config import coerce_method_params

    try:
        cfg = _run_config(args)
        coerce_method_params(cfg.method, cfg.method_params)
    except ValueError as e:
        return str(e)
    return None


def _cmd_run(args: argparse.Namespace) -> int:
    from unlearn_app.checkpoint.hub import HubUploadError

    try:
        overrides = option_values(args)
        if overrides.get("eval_every") is not None:  # one line per evaluation during training (--quiet: warnings only)
            _show_progress("unlearn_methods.eval_during", quiet=overrides.get("progress") is False)
        cfg = _run_config(args)
    except ValueError as e:
        return error(str(e))
    from unlearn_app.pipeline import run_unlearning
    from unlearn_methods.training import UnlearningFailed, main_process

    try:
        out = run_unlearning(cfg)
    except (UnlearningFailed, HubUploadError, ValueError) as e:
        return error(str(e))
    if main_process().is_main_process:  # once under a launcher
        print(f"Checkpoint written to {out}")
    return 0


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    keys = [k for k, _ in pairs]
    twice = next((k for k in keys if keys.count(k) > 1), None)
    if twice is not None:
        raise argparse.ArgumentTypeError(f"gives the key {twice!r} twice; keep one")
    return dict(pairs)


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"expects a JSON object such as '{{\"reference\": \"ref/\"}}' ({e.msg})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expects a JSON object such as '{\"reference\": \"ref/\"}'")
    return value


def key_values(pairs: list[tuple[str, str]], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` pairs of a repeatable flag as a dict; a key given twice is a ValueError naming both values (the
    last one would otherwise win silently)."""
    values: dict[str, str] = {}
    for key, value in pairs:
        if key in values:
            raise ValueError(f"{flag} gives {key!r} twice ({values[key]!r} and {value!r}); give each key once.")
        values[key] = value
    return values


def _key_value(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expects KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    return key.strip(), value.strip()  # converted to the parameter's declared type by the method


def _show_progress(logger: str, quiet: bool) -> None:
    """Print ``logger``'s info lines (progress) on stderr as plain lines; warnings only with --quiet."""
    import logging

    log = logging.getLogger(logger)
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(logging.WARNING if quiet else logging.INFO)


def _flag(f: dataclasses.Field) -> str | None:
    flag = f.metadata["flag"]
    return None if flag is None else flag or "--" + f.name.replace("_", "-")


def _shown_default(f: dataclasses.Field) -> str | None:
    """The default as ``--help`` shows it: the declared words, else the value (none for empty values and False)."""
    if f.metadata["default_text"]:
        return f.metadata["default_text"]
    value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    if value in (None, "", [], {}) or isinstance(value, bool):
        return None
    return f"{value:g}" if isinstance(value, float) else str(value)


def _ranged(f: dataclasses.Field, kind: type) -> Any:
    """An argparse type for a numeric run option: ``kind`` within the field's declared range (the config file's
    values are checked against the same declaration by :func:`unlearn_methods.config.load_run_config`)."""
    import math

    from unlearn_app.argtypes import checked
    from unlearn_methods.config import allowed_range
    from unlearn_methods.params import in_range

    return checked(kind, lambda value: math.isfinite(value) and in_range(f, value),
                   f"must be {'an integer' if kind is int else 'a number'}", f"must be {allowed_range(f)}",
                   "integer" if kind is int else "number")


def _declared(config_class: type) -> tuple[dict[str, Any], list[dataclasses.Field]]:
    """The types and fields of ``config_class``; for RunConfig every `unlearn run` option, the data sources' too."""
    from unlearn_methods.config import RunConfig, run_fields, run_hints

    if config_class is RunConfig:
        return run_hints(), run_fields()
    return typing.get_type_hints(config_class), list(dataclasses.fields(config_class))


def add_run_options(p: argparse.ArgumentParser, config_class: type) -> None:
    """One flag per field of ``config_class`` that declares one (see :func:`unlearn_methods.config.option`): its
    type from the annotation, its help with the default, ``None`` when not given (the config file or the field's
    default applies). For :class:`~unlearn_methods.config.RunConfig`, the data sources' own options too."""
    hints, fields = _declared(config_class)
    for f in fields:
        flag = _flag(f)
        if flag is None:
            continue
        meta, tp = f.metadata, hints[f.name]
        shown = _shown_default(f)
        help_text = (meta["help"] + (f" (default: {shown})" if shown else "")).replace("%", "%%")
        kwargs: dict[str, Any] = {"dest": f.name, "default": None, "metavar": meta["metavar"]}
        if typing.get_origin(tp) in (typing.Union, types.UnionType):  # X | None: the flag reads an X
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        origin = typing.get_origin(tp) or tp
        if origin is bool:
            if meta["negative"]:
                group = p.add_mutually_exclusive_group()
                default_is = f.default is True
                group.add_argument(flag, dest=f.name, action="store_true", default=None,
                                   help=meta["help"].rstrip(".") + (" (default)." if default_is else "."))
                negative, negative_help = meta["negative"]
                group.add_argument(negative, dest=f.name, action="store_false", default=None,
                                   help=negative_help.rstrip(".") + ("." if default_is else " (default)."))
                continue
            p.add_argument(flag, dest=f.name, action="store_true", default=None, help=help_text)
            continue
        if origin is dict:
            kwargs.update(action="append", type=_key_value) if meta["repeat"] else kwargs.update(type=_json_object)
        elif meta["repeat"]:
            kwargs.update(action="append")
        elif origin in (int, float):
            kwargs.update(type=_ranged(f, origin))  # the declared range, checked when the flag is parsed
        if meta["choices"]:
            kwargs["choices"] = list(meta["choices"])
        p.add_argument(flag, help=help_text, **{k: v for k, v in kwargs.items() if v is not None or k == "default"})


def option_values(args: argparse.Namespace, config_class: type | None = None) -> dict[str, Any]:
    """The options given on the command line, by field name (inverted flags turned into the field's value,
    ``--param`` pairs into a dict); the ones not given are left out."""
    if config_class is None:
        from unlearn_methods.config import RunConfig as config_class
    hints, fields = _declared(config_class)
    values: dict[str, Any] = {}
    for f in fields:
        value = getattr(args, f.name, None) if _flag(f) else None
        if value is None:
            continue
        if f.metadata["inverted"]:
            value = not value
        elif typing.get_origin(hints[f.name]) is dict and f.metadata["repeat"]:  # KEY=VALUE pairs
            value = key_values(value, _flag(f))
        values[f.name] = value
    return values


def add_parsers(sub) -> None:
    from unlearn_methods.checkpoint_folder import PARTIAL
    from unlearn_methods.config import OUTPUT_KEY, PATH_KEYS, RunConfig

    p = sub.add_parser("run", help="Unlearn a forget split from a model with one of the methods (`unlearn methods`).",
                       description="Train an unlearning method on a forget split (LoRA by default) and write a Hugging "
                       "Face checkpoint with its model card, resolved config and training metrics. Every option can "
                       "also be given in a YAML file (--config); command-line options win.")
    p.add_argument("--config", help="YAML file with any of the options below (keys with underscores).")
    add_run_options(p, RunConfig)
    p.set_defaults(func=_cmd_run, launch_problem=_launch_problem)
    # an existing OUT has unlearn run's own rule (--overwrite / --resume), checked by the pipeline
    # OUT is written as OUT.partial first (unlearn_methods.checkpoint_folder), which may hold no input either
    output_guard.declare(p, outputs=[OUTPUT_KEY], inputs=[*(k for k in PATH_KEYS if k != OUTPUT_KEY), "config"],
                         folders=[OUTPUT_KEY], existing_needs_overwrite=False, siblings={OUTPUT_KEY: PARTIAL})
