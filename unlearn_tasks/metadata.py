"""Read a task's metadata (task YAML ``metadata`` + ``--metadata`` + lm-eval's model arguments) into its options:
unknown keys are refused, and :class:`MetadataOptions` turns a benchmark's options dataclass into a checked reader.

``--metadata`` reaches every task of a run, and lm-eval copies the model arguments (``pretrained``, ``dtype``, ...)
into it, so a key is accepted when it is an option of any of our benchmarks or a model argument; anything else
(``answer_scorring``) is an error that lists the task's own options, instead of being silently ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import sys
import typing
from collections.abc import Iterable
from typing import Any, ClassVar

from unlearn_tasks.settings import allowed, in_range, markdown_table, matches, words

#: Keys every task YAML may carry (a benchmark's own keys are the fields of its options classes, which register
#: themselves: see :class:`MetadataOptions`).
COMMON_KEYS = {"version", "data_dir", "dataset_path", "max_items_per_split", "parts", "sets", "config", "benchmark"}
#: Keys lm-eval itself adds to every task's metadata.
LM_EVAL_KEYS = {"config_source", "_metadata"}

#: lm-eval model arguments (hf, vllm and common ``from_pretrained`` keywords); the loaded backends' own
#: constructor parameters are added at check time.
MODEL_ARG_KEYS = {
    "pretrained", "dtype", "revision", "peft", "delta", "tokenizer", "trust_remote_code", "use_fast_tokenizer",
    "device", "device_map", "batch_size", "max_batch_size", "max_length", "max_model_len", "backend", "parallelize",
    "gpu_memory_utilization", "tensor_parallel_size", "data_parallel_size", "enforce_eager", "seed", "quantization",
    "load_in_8bit", "load_in_4bit", "attn_implementation", "low_cpu_mem_usage", "subfolder", "add_bos_token",
    "prefix_token_id", "softmax_dtype", "think_end_token", "enable_thinking", "chat_template_args", "max_gen_toks",
    "truncation", "logits_cache", "autogptq", "gptqmodel", "gguf_file", "swap_space", "lora_local_path",
    "max_memory_per_gpu", "max_cpu_memory", "offload_folder", "mixed_precision_dtype", "model_kwargs",
}


def _backend_params() -> set[str]:
    """Constructor parameters of the lm-eval model classes already imported (the run's backend among them)."""
    names: set[str] = set()
    for name, module in list(sys.modules.items()):
        if not name.startswith("lm_eval.models.") or module is None:
            continue
        for obj in vars(module).values():
            if inspect.isclass(obj) and obj.__module__ == name and hasattr(obj, "create_from_arg_string"):
                try:
                    names |= set(inspect.signature(obj.__init__).parameters) - {"self", "args", "kwargs"}
                except (TypeError, ValueError):
                    continue
    return names


def benchmark_keys() -> set[str]:
    """Every option key of every benchmark: the keys of every registered options class (all benchmarks' options
    modules are imported first, :func:`unlearn_tasks.benchmarks.import_options`), the common and lm-eval's keys."""
    from unlearn_tasks.benchmarks import import_options

    import_options()
    return COMMON_KEYS | LM_EVAL_KEYS | set().union(*(cls.metadata_keys() for cls in _REGISTERED.values()))


def check_metadata_keys(metadata: dict[str, Any] | None, own_keys: Iterable[str], where: str) -> None:
    """Raise ValueError for keys that no benchmark and no model argument knows, listing ``own_keys``."""
    own = sorted(set(own_keys))
    unknown = sorted(set(metadata or {}) - benchmark_keys() - MODEL_ARG_KEYS - _backend_params())
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, own, n=1, cutoff=0.75)
        hints.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    raise ValueError(
        f"{where}: unknown --metadata key(s) {', '.join(hints)}. Valid keys for this task: {', '.join(own)} "
        f"(model arguments such as pretrained and dtype are accepted too)."
    )


def check_positive_int(value: Any, name: str, where: str) -> None:
    """``value`` is None or an int >= 1 (a count such as ``max_items_per_split``)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{where}: {name} must be a whole number >= 1 (or left out for all items), got {value!r}.")


# --------------------------------------------------------------------------- options dataclasses
#: Every options class, by qualified name (each registers itself when defined: :meth:`MetadataOptions.__init_subclass__`).
_REGISTERED: dict[str, type[MetadataOptions]] = {}


class MetadataOptions:
    """Base of a benchmark's options dataclass: :meth:`from_metadata` reads the task's metadata (task YAML
    ``metadata`` + ``--metadata`` + lm-eval's model arguments) into the dataclass's fields.

    It refuses keys no benchmark knows (:func:`check_metadata_keys`: the union of every registered options class's
    keys, with a suggestion from the task's own), fills the fields (:meth:`complete` then sets what comes from
    elsewhere), checks each value of its declared type against the field's declared range and choices, runs
    :meth:`validate` (what involves several keys) and checks every field's value against its type; each message
    names the key and what it takes. A subclass registers itself when it is defined.
    Class attributes: ``WHERE`` (the task's name in messages), ``EXTRA_KEYS`` (keys accepted that are not fields),
    ``DERIVED`` (fields never read from the metadata), ``COMMA_LISTS`` (list fields that also take "a,b" text),
    ``RENAMED`` (metadata key -> field, for fields read under another key, e.g. ``relu_mode`` -> ``mode``).
    A field without a default is required: its absence is an error naming its key. A field declared with
    :func:`unlearn_tasks.settings.param` (help, range, choices) is checked against its range and choices before
    :meth:`validate`, and its help is the docs' table of the benchmark's options (:meth:`help`)."""

    WHERE: ClassVar[str] = "task"
    EXTRA_KEYS: ClassVar[frozenset[str]] = frozenset({"version"})
    DERIVED: ClassVar[frozenset[str]] = frozenset()
    COMMA_LISTS: ClassVar[frozenset[str]] = frozenset()
    RENAMED: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTERED[f"{cls.__module__}.{cls.__qualname__}"] = cls

    @classmethod
    def _fields_by_key(cls) -> dict[str, dataclasses.Field]:
        """The fields read from the metadata, by the key they are read under."""
        key_of = {name: key for key, name in cls.RENAMED.items()}
        return {key_of.get(f.name, f.name): f for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                if f.name not in cls.DERIVED}

    @classmethod
    def metadata_keys(cls) -> set[str]:
        """The ``--metadata`` keys this class reads or accepts."""
        return set(cls._fields_by_key()) | cls.EXTRA_KEYS

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any] | None):
        md = dict(metadata or {})
        by_key = cls._fields_by_key()
        check_metadata_keys(md, cls.metadata_keys(), cls.WHERE)
        missing = [key for key, f in by_key.items() if md.get(key) is None and (f.metadata.get("required") or (
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING))]
        if missing:
            raise ValueError(f"{cls.WHERE}: metadata lacks {', '.join(missing)} (check the task YAML).")
        values = {by_key[k].name: v for k, v in md.items() if k in by_key and v is not None}
        for name in cls.COMMA_LISTS & set(values):
            if isinstance(values[name], str):
                values[name] = [part.strip() for part in values[name].split(",") if part.strip()]
        opts = cls(**values)
        opts.complete(md)
        hints = typing.get_type_hints(cls)
        key_of = {f.name: key for key, f in by_key.items()}
        for key, f in by_key.items():  # the range and choices a field declares (param(...)), on values of its type
            value = getattr(opts, f.name)
            if isinstance(value, float) and not math.isfinite(value):  # 1e400 in JSON is inf: no option takes it
                raise ValueError(f"{cls.WHERE} option: {key} must be a finite number, got {value!r} (check "
                                 "--metadata / the task YAML).")
            if value is not None and matches(value, hints[f.name]) and not cls._in_range(f, value):
                raise ValueError(f"{cls.WHERE} option: {key} must be {cls._expected(f, hints[f.name])}, got "
                                 f"{value!r} (check --metadata / the task YAML).")
        wrong = next((k for k, v in sorted(values.items()) if not matches(v, hints[k])), None)
        try:
            opts.validate()  # what involves several keys, and the messages a benchmark words itself
        except TypeError:  # a value of the wrong type met a comparison: the type check below says which
            if wrong is None:
                raise
        if wrong is not None:
            f = next(f for f in dataclasses.fields(cls) if f.name == wrong)  # type: ignore[arg-type]
            expected = cls._expected(f, hints[wrong]) if typing.get_origin(hints[wrong]) is list else words(hints[wrong])
            raise ValueError(f"{cls.WHERE} option: {key_of[wrong]} must be {expected}, got {values[wrong]!r} (check "
                             "--metadata / the task YAML).")
        return opts

    @staticmethod
    def _in_range(f: dataclasses.Field, value: Any) -> bool:
        """Whether ``value`` is within the field's declared range; a list: some items, all among its choices."""
        if isinstance(value, list):
            choices = f.metadata.get("choices")
            return not choices or bool(value) and set(value) <= set(choices)
        return isinstance(value, dict) or in_range(f, value)

    @staticmethod
    def _expected(f: dataclasses.Field, hint: Any) -> str:
        """What a field takes, in words: ``one of a, b``; ``a whole number >= 1``; for a list with choices the
        choices it is a subset of; else its type."""
        choices, rng = f.metadata.get("choices"), allowed(f)
        if choices and typing.get_origin(hint) is list:
            return f"a non-empty subset of {', '.join(map(str, choices))}"
        if choices:
            return rng
        plain = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        return f"{words(plain[0] if len(plain) == 1 else hint)}{f' {rng}' if rng else ''}"

    @classmethod
    def markdown(cls) -> list[str]:
        """The options declared with :func:`unlearn_tasks.settings.param` as a Markdown table, by ``--metadata``
        key (the docs' tables; :mod:`unlearn_app.catalogue` writes them)."""
        keys = {f.name: key for key, f in cls._fields_by_key().items()}
        declared = {f.name for f in dataclasses.fields(cls) if "help" in f.metadata and f.name in keys}
        return markdown_table(cls, "`--metadata` key", keys) if declared else []

    @classmethod
    def help(cls) -> dict[str, str]:
        """``{key: help}`` of the options declared with :func:`unlearn_tasks.settings.param` (docs tables)."""
        return {key: f.metadata["help"] for key, f in cls._fields_by_key().items() if "help" in f.metadata}

    def complete(self, metadata: dict[str, Any]) -> None:
        """Fill the fields that depend on other keys or on the model arguments (default: nothing)."""

    def validate(self) -> None:
        """Check the values together; raise ValueError saying what to change (default: nothing)."""

    def require(self, checks: Iterable[tuple[bool, str]]) -> None:
        """Raise ValueError with the message of the first ``(ok, message)`` that is not ok (for :meth:`validate`)."""
        for ok, message in checks:
            if not ok:
                raise ValueError(f"{self.WHERE} option: {message} (check --metadata / the task YAML).")


def per_key(value: Any, key: str) -> Any:
    """An option given once or per split / corpus (``{"forget10": ..., "forget01": ...}``): the value for ``key``."""
    return value.get(key) if isinstance(value, dict) else value
