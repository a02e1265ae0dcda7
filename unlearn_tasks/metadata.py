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
import os
import sys
import types
import typing
from collections.abc import Iterable
from typing import Any, ClassVar

#: Keys every task YAML may carry, and the options of each benchmark (``--metadata`` reaches every task of a run).
COMMON_KEYS = {"version", "data_dir", "dataset_path", "max_items_per_split", "parts", "sets", "config", "benchmark"}
#: Keys lm-eval itself adds to every task's metadata.
LM_EVAL_KEYS = {"config_source", "_metadata"}
TOFU_KEYS = {"forget_split", "reference", "answer_scoring", "truth_ratio_mean", "truth_ratio_aggregator", "mia_k",
             "generation_prompt", "mia_gradnorm", "gibberish"}
MARGINS_KEYS = {"data_file", "prompt_field", "target_field", "text_field", "split_field", "reduction", "include_eos",
                "keep_token_margins"}
WATERDRUM_KEYS = {"waterdrum_data_dir", "splits", "duplicate_owner", "owners", "generations", "prompt_tokens",
                  "prompt_tokenizer", "verify_tokenizer", "verify_vocab_size", "ids", "k_p", "workers",
                  "knowmem_split", "knowmem_max_tokens", "mia_k"}
RELU_KEYS = {"relu_format", "relu_splits", "relu_pair", "relu_options", "relu_mode", "relu_data_dir", "relu_dataset_path"}
DEEP_UNLEARNING_KEYS = {"mquake_path", "target", "fix_rule_typos"}
CLEAR_KEYS = {"mode", "seed", "tofu_data_dir", "tofu_dataset_path"}
MUSE_KEYS = {"corpus", "muse_data_dir", "verbmem_max_tokens", "knowmem_max_tokens", "tokenizer", "tokenizer_kwargs"}

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
    """Every option key of every benchmark of this package (tests check these sets against the options classes)."""
    return (COMMON_KEYS | LM_EVAL_KEYS | TOFU_KEYS | WATERDRUM_KEYS | MARGINS_KEYS | RELU_KEYS | DEEP_UNLEARNING_KEYS
            | CLEAR_KEYS | MUSE_KEYS)


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
def _type_name(hint: Any) -> str:
    """``text``, ``a list of text``, ``text or an object {text: text} or null``: a field type as a user reads it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is list:
        inner = _type_name(args[0]).removeprefix("a ") if args else ""
        return f"a list of {inner}{'s' if inner.endswith('number') else ''}" if args else "a list"
    if origin is dict:
        return "an object {" + ": ".join(_type_name(a) for a in args) + "}" if args else "an object"
    names = {str: "text", int: "a whole number", float: "a number", bool: "true or false", type(None): "null"}
    return "any value" if hint is Any else names.get(hint, getattr(hint, "__name__", str(hint)))


def _matches(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in args)
    if origin is list:
        return isinstance(value, list) and all(_matches(v, args[0]) for v in value) if args else isinstance(value, list)
    if origin is dict:
        return isinstance(value, dict) and (not args or all(
            _matches(k, args[0]) and _matches(v, args[1]) for k, v in value.items()))
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


class MetadataOptions:
    """Base of a benchmark's options dataclass: :meth:`from_metadata` reads the task's metadata (task YAML
    ``metadata`` + ``--metadata`` + lm-eval's model arguments) into the dataclass's fields.

    It refuses keys no benchmark knows (:func:`check_metadata_keys`), fills the fields (:meth:`complete` then sets
    what comes from elsewhere), runs :meth:`validate` (its messages say which values are allowed) and checks every
    field's value against its type, naming the key and the type.
    Class attributes: ``WHERE`` (the task's name in messages), ``EXTRA_KEYS`` (keys accepted that are not fields),
    ``DERIVED`` (fields never read from the metadata), ``COMMA_LISTS`` (list fields that also take "a,b" text)."""

    WHERE: ClassVar[str] = "task"
    EXTRA_KEYS: ClassVar[frozenset[str]] = frozenset({"version"})
    DERIVED: ClassVar[frozenset[str]] = frozenset()
    COMMA_LISTS: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any] | None):
        md = dict(metadata or {})
        known = {f.name for f in dataclasses.fields(cls)} - cls.DERIVED  # type: ignore[arg-type]
        check_metadata_keys(md, known | cls.EXTRA_KEYS, cls.WHERE)
        values = {k: v for k, v in md.items() if k in known and v is not None}
        for name in cls.COMMA_LISTS & set(values):
            if isinstance(values[name], str):
                values[name] = [part.strip() for part in values[name].split(",") if part.strip()]
        opts = cls(**values)
        opts.complete(md)
        hints = typing.get_type_hints(cls)
        wrong = next((k for k, v in sorted(values.items()) if not _matches(v, hints[k])), None)
        try:
            opts.validate()
        except TypeError:  # a value of the wrong type met a comparison: the type check below says which
            if wrong is None:
                raise
        if wrong is not None:
            raise ValueError(f"{cls.WHERE} option: {wrong} must be {_type_name(hints[wrong])}, got {values[wrong]!r} "
                             f"(check --metadata / the task YAML).")
        return opts

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
