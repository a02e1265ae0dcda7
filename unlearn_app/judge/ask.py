"""Asking the judge through lm-eval's own model classes (``lm_eval.api.registry.get_model``): ``hf`` (a local or
Hub model), ``vllm``, and any OpenAI-compatible server through ``local-completions`` / ``local-chat-completions``.
Every question is an lm-eval ``generate_until`` request, greedy (``do_sample`` False, temperature 0) with the
prompt's small ``max_gen_toks``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BACKENDS = ("hf", "vllm", "local-completions", "local-chat-completions")
SERVER_BACKENDS = ("local-completions", "local-chat-completions")


@dataclass(frozen=True)
class JudgeSpec:
    """The judge as the command line names it."""

    model: str
    backend: str = "hf"
    base_url: str | None = None  # the server's completions URL (server backends)
    revision: str | None = None  # a Hub revision, or the served model's revision as the user states it
    batch_size: int = 8
    device: str | None = None
    chat_template: bool | None = None  # None: the judge's own when it has one (always for chat completions)


def identity(spec: JudgeSpec) -> dict[str, str]:
    """``{"model", "revision", "backend"}`` of the judge: a local folder's revision is the sha256 of its files; a Hub
    model's the revision given, else the commit the local Hub cache holds for ``main``; a served model's the
    revision given, else ``unknown``."""
    out = {"model": spec.model, "backend": spec.backend}
    folder = Path(spec.model).expanduser()
    if spec.backend not in SERVER_BACKENDS and folder.is_dir():
        out["model"] = folder.name
        from harness_ext.provenance import folder_sha256

        out["revision"] = spec.revision or f"sha256:{folder_sha256(folder)}"
    elif spec.backend not in SERVER_BACKENDS:
        out["revision"] = spec.revision or _cached_commit(spec.model) or "unknown (not in the local Hub cache)"
    else:
        out["revision"] = spec.revision or "unknown (served model; pass --judge-revision)"
        out["server"] = spec.base_url or ""
    return out


def _cached_commit(repo_id: str) -> str | None:
    from huggingface_hub.constants import HF_HUB_CACHE

    ref = Path(HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}" / "refs" / "main"
    return ref.read_text().strip() if ref.is_file() else None


def make_lm(spec: JudgeSpec) -> Any:
    """lm-eval's model object of ``spec.backend`` (each request carries its own ``max_gen_toks``)."""
    from lm_eval.api.registry import get_model

    from harness_ext.evaluate import default_device

    args: dict[str, Any]
    if spec.backend in SERVER_BACKENDS:
        args = {"model": spec.model, "base_url": spec.base_url, "tokenizer_backend": None,
                "tokenized_requests": False, "max_retries": 1}
    else:
        args = {"pretrained": spec.model, "batch_size": spec.batch_size}
        if spec.revision and not Path(spec.model).expanduser().is_dir():
            args["revision"] = spec.revision
        device = spec.device or default_device(spec.backend)  # lm-eval's hf default, "cuda", fails without a GPU
        if device:
            args["device"] = device
    return get_model(spec.backend)(**args)


def uses_chat_template(lm: Any, spec: JudgeSpec) -> bool:
    """Whether the prompts go through the judge's chat template: always for chat completions, never for plain
    completions; for hf / vLLM when the judge's tokenizer has one (or as ``spec.chat_template`` says)."""
    if spec.backend == "local-chat-completions":
        return True
    if spec.backend == "local-completions":
        return False
    if spec.chat_template is not None:
        return spec.chat_template
    return bool(getattr(getattr(lm, "tokenizer", None), "chat_template", None))


class JudgeReplyError(ValueError):
    """A judge's reply that cannot be read (a server's malformed answer, a reply that is no text); one line."""


def ask(lm: Any, prompts: Sequence[str], max_gen_toks: int, chat: bool, server: bool = False) -> list[str]:
    """The judge's replies to ``prompts`` (as user turns through its chat template when ``chat``). ``server``: the
    replies come from an OpenAI-compatible server, whose answer lm-eval parses: one it cannot parse (no choices,
    JSON nested too deep, an integer too long to read, a missing field) is a :class:`JudgeReplyError`."""
    from harness_ext.instances import standalone_request

    gen = {"until": [], "max_gen_toks": max_gen_toks, "do_sample": False, "temperature": 0.0}
    contexts = [lm.apply_chat_template([{"role": "user", "content": p}]) if chat else p for p in prompts]
    requests = [standalone_request("generate_until", (c, dict(gen))) for c in contexts]
    try:
        replies = lm.generate_until(requests)
    except (ValueError, RecursionError, LookupError, TypeError, AttributeError) as e:
        if not server or isinstance(e, OSError):
            raise
        if isinstance(e, ValueError) and "zip()" in str(e):  # lm-eval pairs each prompt with a choice by zip(strict)
            raise JudgeReplyError(f"the judge server answered {len(requests)} prompt(s) with fewer choices (OpenAI's "
                                  "completions schema gives one per prompt); check --base-url and the server") from None
        raise JudgeReplyError(f"the judge server's answer could not be read as OpenAI's completions schema "
                              f"({type(e).__name__}: {str(e)[:160]}); check --base-url and the server") from None
    return [r if isinstance(r, str) else "" for r in replies]
