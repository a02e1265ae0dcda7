"""Check a task's metadata (task YAML ``metadata`` + ``--metadata`` + lm-eval's model arguments) for unknown keys.

``--metadata`` reaches every task of a run, and lm-eval copies the model arguments (``pretrained``, ``dtype``, ...)
into it, so a key is accepted when it is an option of any of our benchmarks or a model argument; anything else
(``answer_scorring``) is an error that lists the task's own options, instead of being silently ignored.
"""

from __future__ import annotations

import difflib
import inspect
import sys
from collections.abc import Iterable
from typing import Any

#: Keys every task YAML may carry, and the options of each benchmark (``--metadata`` reaches every task of a run).
COMMON_KEYS = {"version", "data_dir", "dataset_path", "max_items_per_split", "parts", "sets", "config", "benchmark"}
#: Keys lm-eval itself adds to every task's metadata.
LM_EVAL_KEYS = {"config_source", "_metadata"}
TOFU_KEYS = {"forget_split", "reference", "answer_scoring", "truth_ratio_mean", "mia_k", "generation_prompt"}
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
