"""Everything that depends on lm-eval 0.4.13 internals, in one place, so an lm-eval upgrade touches one file.

1. :func:`patch_task_manager_class`: our task folder on every ``TaskManager``'s include path;
   :func:`task_manager_with_metadata`: a ``TaskManager`` sharing an index already built (see ``task_index``).
2. The request type ``unlearn_answer_logprobs``: per-token log-probabilities of a continuation (EOS appended,
   as TOFU scores answers), the per-token margins ``z_y - logsumexp_{v != y} z_v`` (for KLoM; on vLLM from the
   chosen-token log-prob as ``log p - log(1 - p)``), the scored ids without the first one decoded
   (``decoded_tail``, for the zlib attack under TOFU's answer boundary) plus, on the ``hf`` backend, the mean and
   variance of the log-probabilities under the model's next-token distribution at each position (for Min-K%++),
   computed a few positions at a time by :mod:`harness_ext.token_scoring`. An optional third argument (a dict)
   lets a task give the token ids itself (``context_ids`` / ``continuation_ids``: a release's own tokenisation)
   and switch the EOS off (``append_eos: False``).
3. The request type ``unlearn_generate_tokens``: greedy generation of exactly the document's token budget under
   the model's *own* generation config (no lm-eval stop sequences, so a model whose generation config does not
   stop at the tokenizer's EOS runs past it), decoded with special tokens kept: how benchmark releases that call
   ``model.generate`` + ``tokenizer.decode`` generate.
lm-eval dispatches a request by calling ``getattr(lm, request_type)``; we add these methods to the ``LM`` base
class. They are implemented for ``hf`` (and subclasses) and ``vllm``; other backends get a clear error.
4. :func:`quiet_git_hash`: lm-eval's git-commit lookup without git's "fatal: not a git repository" on stderr;
   :func:`cache_env_info`: lm-eval's environment report computed once per process, not once per evaluation.
5. :func:`install_input_error_hook`: our tasks' input errors (bad data, reference, options) end the ``lm_eval``
   command with one ``error:`` line instead of a traceback.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness_ext import tasks_dir

log = logging.getLogger(__name__)

ANSWER_LOGPROBS = "unlearn_answer_logprobs"
GENERATE_TOKENS = "unlearn_generate_tokens"


# --------------------------------------------------------------------------- task discovery
def patch_task_manager_class(cls: type) -> None:
    """Make ``cls.__init__`` prepend our task folder to ``include_path`` (idempotent)."""
    if getattr(cls.__init__, "_unlearn_patched", False):
        return
    original = cls.__init__
    signature = inspect.signature(original)
    ours = str(tasks_dir())

    @functools.wraps(original)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        given = bound.arguments.get("include_path")
        if given is None:
            paths: list = [ours]
        elif isinstance(given, (list, tuple)):
            paths = [ours, *[p for p in given if str(p) != ours]]
        else:
            paths = [ours] if str(given) == ours else [ours, given]
        bound.arguments["include_path"] = paths
        original(*bound.args, **bound.kwargs)

    __init__._unlearn_patched = True  # type: ignore[attr-defined]
    cls.__init__ = __init__


def task_manager_with_metadata(base: Any, metadata: dict[str, Any] | None) -> Any:
    """A copy of the ``TaskManager`` ``base`` whose tasks get ``metadata``, without indexing the YAMLs again:
    lm-eval 0.4.13 keeps the metadata in ``_factory`` and the index in ``_index`` (copied: building a group adds
    entries to it)."""
    import copy

    from lm_eval.tasks._factory import TaskFactory

    manager = copy.copy(base)
    manager.metadata = metadata
    manager._factory = TaskFactory(meta=metadata)
    manager._index = dict(base._index)
    return manager


# --------------------------------------------------------------------------- answer log-probabilities
def _is_backend(lm: Any, class_name: str, module_prefix: str) -> bool:
    return any(c.__name__ == class_name and c.__module__.startswith(module_prefix) for c in type(lm).__mro__)


def _encode(lm: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    if context == "":
        return [lm.prefix_token_id], lm.tok_encode(continuation, add_special_tokens=False)
    return lm._encode_pair(context, continuation)


def _request_options(req: Any) -> dict:
    return req.args[2] if len(req.args) > 2 and isinstance(req.args[2], dict) else {}


def encode_request(lm: Any, req: Any) -> tuple[list[int], list[int]]:
    """(context ids, scored ids) of an ``unlearn_answer_logprobs`` request: lm-eval's own split of the two strings,
    or the ids the task gave (``context_ids`` / ``continuation_ids``); EOS appended unless ``append_eos`` is False."""
    options = _request_options(req)
    if "continuation_ids" in options:
        ctx_enc = list(options.get("context_ids") or []) or [lm.prefix_token_id]
        cont_enc = list(options["continuation_ids"])
    else:
        ctx_enc, cont_enc = _encode(lm, *req.args[:2])
    if options.get("append_eos", True):
        cont_enc = list(cont_enc) + [lm.eot_token_id]
    return list(ctx_enc), list(cont_enc)


def _decoded_tail(lm: Any, cont_enc: list[int]) -> str:
    """The scored ids without the first, decoded with special tokens skipped: the text open-unlearning's zlib attack
    compresses under TOFU's answer boundary."""
    return lm.tokenizer.decode(cont_enc[1:], skip_special_tokens=True)


def _hf_answer_logprobs(lm: Any, requests: list) -> list[dict]:
    import torch
    from tqdm import tqdm

    from harness_ext.token_scoring import score_sequences

    if getattr(lm, "backend", "causal") != "causal":
        raise NotImplementedError("TOFU answer scoring supports causal language models only.")
    encoded = [encode_request(lm, req) for req in requests]
    order = sorted(range(len(encoded)), key=lambda i: -(len(encoded[i][0]) + len(encoded[i][1])))
    batch_size = lm.batch_size if isinstance(lm.batch_size, int) else int(getattr(lm, "max_batch_size", 16) or 16)
    results: list[dict | None] = [None] * len(encoded)
    for start in tqdm(range(0, len(order), batch_size), desc="Scoring answer tokens", disable=lm.rank != 0):
        idx = order[start : start + batch_size]
        rows, n_conts = [], []
        for i in idx:
            ctx_enc, cont_enc = encoded[i]
            full = (ctx_enc + cont_enc)[-(lm.max_length + 1) :][:-1]
            rows.append(full)
            n_conts.append(min(len(cont_enc), len(full)))
        width = max(len(r) for r in rows)
        batch = torch.zeros((len(rows), width), dtype=torch.long, device=lm.device)
        for r, row in enumerate(rows):
            batch[r, : len(row)] = torch.tensor(row, dtype=torch.long)
        spans = [(len(row) - n, len(row)) for row, n in zip(rows, n_conts, strict=True)]
        targets = [encoded[i][1][-n:] for i, n in zip(idx, n_conts, strict=True)]
        # The float32 log-softmax and its statistics are computed for the scored positions only, a few at a
        # time, reading the model's logits in place: no [B, T, V] float32 tensor.
        logits = lm._model_call(batch)
        for i, scores in zip(idx, score_sequences(logits, spans, targets), strict=True):
            results[i] = {**scores, "decoded_tail": _decoded_tail(lm, encoded[i][1])}
        del logits
    return results  # type: ignore[return-value]


def _vllm_answer_logprobs(lm: Any, requests: list) -> list[dict]:
    max_ctx = lm.max_length - 1
    inputs, n_conts = [], []
    for req in requests:
        ctx_enc, cont_enc = encode_request(lm, req)
        full = (ctx_enc + cont_enc)[-max_ctx:]
        inputs.append(full)
        n_conts.append(min(len(cont_enc), len(full) - 1))
    outputs = lm._model_generate(requests=inputs, generate=False)
    results = []
    for out, full, n in zip(outputs, inputs, n_conts, strict=True):
        lps = []
        for tok, dist in zip(full[-n:], out.prompt_logprobs[-n:], strict=True):
            value = dist[tok]
            lps.append(float(getattr(value, "logprob", value)))
        # vLLM returns only the chosen tokens' log-probs, not the whole distribution: no Min-K%++ statistics;
        # the margin is log p - log(1 - p), the same quantity as z_y - logsumexp of the others.
        margins = [lp - math.log(-math.expm1(lp)) if lp < 0 else math.inf for lp in lps]
        results.append({"logprobs": lps, "vocab_mean": None, "vocab_var": None, "margins": margins,
                        "decoded_tail": _decoded_tail(lm, full[-n:])})
    return results


def answer_logprobs(self: Any, requests: list) -> list[dict]:
    """``LM.unlearn_answer_logprobs``: per-token log-probs of each (context, continuation + EOS), conditioned on
    the request's images on the multimodal backends (:mod:`harness_ext.multimodal`)."""
    from harness_ext import multimodal

    if _is_backend(self, "HFMultimodalLM", "lm_eval.models.hf_vlms"):
        return multimodal.hf_multimodal_answer_logprobs(self, requests, _hf_answer_logprobs)
    if _is_backend(self, "VLLM_VLM", "lm_eval.models.vllm_vlms"):
        return multimodal.vllm_vlm_answer_logprobs(self, requests, _vllm_answer_logprobs)
    if any(multimodal.visuals_of(r) for r in requests):
        raise NotImplementedError(
            f"Answer log-probabilities conditioned on images are implemented for the 'hf-multimodal' and 'vllm-vlm' "
            f"backends; {type(self).__name__} is neither. Run with --model hf-multimodal or --model vllm-vlm."
        )
    if _is_backend(self, "HFLM", "lm_eval.models.huggingface"):
        return _hf_answer_logprobs(self, requests)
    if _is_backend(self, "VLLM", "lm_eval.models.vllm"):
        return _vllm_answer_logprobs(self, requests)
    raise NotImplementedError(
        f"The TOFU tasks need per-token answer log-probabilities, which lm-eval-unlearning implements for the "
        f"'hf' and 'vllm' backends (and their subclasses, 'hf-multimodal' and 'vllm-vlm' included); "
        f"{type(self).__name__} is none of them. Run with --model hf or --model vllm."
    )


def patch_multimodal_generation() -> None:
    """Let ``hf-multimodal`` generate for a batch that mixes text-only and image requests (idempotent)."""
    try:
        from lm_eval.models.hf_vlms import HFMultimodalLM
        from lm_eval.models.huggingface import HFLM
    except ImportError:  # pragma: no cover - lm-eval without the multimodal backend
        return
    from harness_ext.multimodal import generate_until_split

    if not getattr(HFMultimodalLM.generate_until, "_unlearn_patched", False):
        HFMultimodalLM.generate_until = generate_until_split(HFMultimodalLM.generate_until, HFLM.generate_until)


# --------------------------------------------------------------------------- generation to a token budget
def _budget_request(lm: Any, req: Any) -> tuple[list[int], int]:
    """(context ids, number of new tokens): ``context_ids`` if the task tokenised the prompt, else lm-eval's."""
    options = _request_options(req) or (req.args[1] if len(req.args) > 1 and isinstance(req.args[1], dict) else {})
    ids = list(options.get("context_ids") or []) or lm.tok_encode(req.args[0])
    return ids, int(options["max_new_tokens"])


def _stop_ids(generation_config: Any) -> set[int]:
    eos = getattr(generation_config, "eos_token_id", None)
    return set(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])


def _hf_generate_tokens(lm: Any, requests: list) -> list[str]:
    import torch
    from tqdm import tqdm

    if getattr(lm, "backend", "causal") != "causal":
        raise NotImplementedError("Token-budget generation supports causal language models only.")
    encoded = [_budget_request(lm, req) for req in requests]
    stops = _stop_ids(lm.model.generation_config)
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else lm.eot_token_id
    batch_size = lm.batch_size if isinstance(lm.batch_size, int) else int(getattr(lm, "max_batch_size", 16) or 16)
    results: list[str] = [""] * len(encoded)
    for start in tqdm(range(0, len(encoded), batch_size), desc="Generating to token budgets", disable=lm.rank != 0):
        idx = list(range(start, min(start + batch_size, len(encoded))))
        width = max(len(encoded[i][0]) for i in idx)
        ids = torch.full((len(idx), width), pad, dtype=torch.long, device=lm.device)
        mask = torch.zeros((len(idx), width), dtype=torch.long, device=lm.device)
        for r, i in enumerate(idx):  # left padding, as generation needs
            row = encoded[i][0]
            ids[r, width - len(row):] = torch.tensor(row, dtype=torch.long)
            mask[r, width - len(row):] = 1
        with torch.no_grad():
            out = lm.model.generate(input_ids=ids, attention_mask=mask, do_sample=False, pad_token_id=pad,
                                    max_new_tokens=max(encoded[i][1] for i in idx))
        for r, i in enumerate(idx):
            new = out[r, width:].tolist()[: encoded[i][1]]
            end = next((k + 1 for k, t in enumerate(new) if t in stops), len(new))  # a stopped row is then padded
            results[i] = lm.tokenizer.decode(new[:end], skip_special_tokens=False)
    return results


def _vllm_generate_tokens(lm: Any, requests: list) -> list[str]:
    from transformers import GenerationConfig
    from vllm import SamplingParams

    try:  # stop where the model's own generation config stops (as transformers' generate), not at the tokenizer's EOS
        stops = _stop_ids(GenerationConfig.from_pretrained(lm.model_args["model"]))
    except Exception:  # noqa: BLE001 - no generation config: the tokenizer's EOS, as transformers would use
        stops = {lm.eot_token_id}
    encoded = [_budget_request(lm, req) for req in requests]
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True, stop_token_ids=sorted(stops),
                             skip_special_tokens=False) for _, n in encoded]
    outputs = lm._model_generate(requests=[ids for ids, _ in encoded], generate=True, sampling_params=params)
    return [lm.tokenizer.decode(list(out.outputs[0].token_ids), skip_special_tokens=False) for out in outputs]


def generate_tokens(self: Any, requests: list) -> list[str]:
    """``LM.unlearn_generate_tokens``: greedy generation of ``max_new_tokens`` per request (see the module doc)."""
    if _is_backend(self, "HFLM", "lm_eval.models.huggingface"):
        return _hf_generate_tokens(self, requests)
    if _is_backend(self, "VLLM", "lm_eval.models.vllm"):
        return _vllm_generate_tokens(self, requests)
    raise NotImplementedError(
        f"Generation to a release's token budget (parity mode) is implemented for the 'hf' and 'vllm' backends "
        f"(and their subclasses); {type(self).__name__} is neither. Run with --model hf or --model vllm."
    )


def install_request_types() -> None:
    """Add our request types to lm-eval's ``LM`` base class (idempotent); greedy ``hf`` generation without the rows
    that ended (:mod:`harness_ext.generation`); quiet lm-eval's git lookup."""
    from lm_eval.api.model import LM

    from harness_ext.generation import patch_hf_generation

    for name, method in ((ANSWER_LOGPROBS, answer_logprobs), (GENERATE_TOKENS, generate_tokens)):
        if not hasattr(LM, name):
            setattr(LM, name, method)
    patch_multimodal_generation()
    patch_hf_generation()
    quiet_git_hash()


# --------------------------------------------------------------------------- output noise
def _git_commit_hash() -> str | None:
    """lm-eval's ``get_git_commit_hash`` (``git describe --always``, else ``.git/HEAD`` of the working directory)
    with git's stderr captured instead of printed."""
    from lm_eval.loggers.utils import get_commit_from_path

    try:
        done = subprocess.run(["git", "describe", "--always"], capture_output=True, text=True, check=True)  # noqa: S607
        return done.stdout.strip()
    except (subprocess.CalledProcessError, OSError):
        return get_commit_from_path(os.getcwd())


def quiet_git_hash() -> None:
    """lm-eval 0.4.13 runs ``git describe`` at the end of every evaluation and lets git print "fatal: not a git
    repository" when run outside one. Point ``lm_eval.evaluator``'s reference at :func:`_git_commit_hash`
    (same result, no stderr); installed when one of our tasks is built, so only runs of our tasks see it."""
    import lm_eval.evaluator as evaluator

    if getattr(evaluator, "get_git_commit_hash", None) is not _git_commit_hash:
        evaluator.get_git_commit_hash = _git_commit_hash


_ENV_INFO: dict[str, Any] = {}


def _add_env_info_once(storage: dict[str, Any]) -> None:
    """lm-eval's ``add_env_info`` (torch's environment report, which runs ``pip list`` and other commands in
    subprocesses: about 5 s) computed once per process and copied into every later results dict."""
    if not _ENV_INFO:
        from lm_eval.loggers.utils import add_env_info

        add_env_info(_ENV_INFO)
    storage.update(_ENV_INFO)


def cache_env_info() -> None:
    """Point ``lm_eval.evaluator``'s ``add_env_info`` at :func:`_add_env_info_once`, for processes that run many
    evaluations (``unlearn run --eval-every``, the demo); the results files keep the same fields and values."""
    import lm_eval.evaluator as evaluator

    if getattr(evaluator, "add_env_info", None) is not _add_env_info_once:
        evaluator.add_env_info = _add_env_info_once


# --------------------------------------------------------------------------- one-line input errors
_OURS = tuple(str(Path(__file__).resolve().parent.parent / p) + os.sep for p in ("harness_ext", "unlearn_tasks"))
TRACEBACK_ENV = "UNLEARN_TRACEBACK"


def is_input_error(exc: BaseException) -> bool:
    """A ValueError raised by this package's own code: a message written for the user (data, reference, options)."""
    if not isinstance(exc, ValueError) or exc.__traceback__ is None:
        return False
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_OURS)


def _excepthook(exc_type, exc, tb, previous=sys.excepthook) -> None:
    if is_input_error(exc) and os.environ.get(TRACEBACK_ENV, "0") in ("", "0"):
        print(f"error: {exc}\n(set {TRACEBACK_ENV}=1 for the traceback)", file=sys.stderr)
        return
    previous(exc_type, exc, tb)


def install_input_error_hook() -> None:
    """Make an uncaught input error of our tasks print one line (called when one of our tasks is built, so only
    processes that run our tasks are affected; exceptions still propagate to Python callers as usual)."""
    if not getattr(sys.excepthook, "_unlearn_input_errors", False):
        hook = functools.partial(_excepthook, previous=sys.excepthook)
        hook._unlearn_input_errors = True  # type: ignore[attr-defined]
        sys.excepthook = hook


__all__ = ["ANSWER_LOGPROBS", "GENERATE_TOKENS", "encode_request", "install_input_error_hook", "install_request_types",
           "patch_task_manager_class", "quiet_git_hash", "cache_env_info"]
