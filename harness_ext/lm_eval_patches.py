"""The patches of lm-eval 0.4.13 that an lm-eval upgrade can break, and the lm-eval-internal facts they rest on.

- :func:`patch_task_manager_class`: our task folder on every ``TaskManager``'s include path (``autoload`` calls it).
- :func:`add_request_types`: lm-eval dispatches a request by calling ``getattr(lm, request_type)``, so a request
  type of ours is a method added to the ``LM`` base class (:mod:`harness_ext.request_types` lists them).
- :func:`is_backend`: which lm-eval model class a backend is (:data:`BACKENDS`: class name and module);
  :func:`request_options`: the dict a task put among a request's arguments; :func:`hf_batch_size`.
- :func:`patch_multimodal_generation`: ``hf-multimodal`` generates for a batch mixing text-only and image requests.
- :func:`patch_hf_data_parallel`: ``accelerate launch -m lm_eval --model hf`` splits the requests over CPU processes
  as it does over GPUs (``autoload`` installs it when lm-eval's ``hf`` backend is imported);
  :func:`in_document_order`: the per-document values the main process gathered from the processes, put back in
  document order; :func:`drop_padding_responses`: the answers to the requests lm-eval adds to even out the
  processes' request counts, taken off the request they were appended to.
- :func:`quiet_git_hash`: lm-eval's git-commit lookup without git's "fatal: not a git repository" on stderr;
  :func:`cache_env_info`: lm-eval's environment report computed once per process, not once per evaluation.
- :func:`harness_ext.group_scores.patch_aggregate_groups`: ``lm_eval.evaluator_utils.aggregate_groups`` also writes
  the scores a group computes from several tasks' results (LUME's aggregate) into the group's row, and
  ``_propagate_higher_is_better`` adds their directions to the group's.

What else an upgrade can touch: the backends' own methods the request types call (``_model_call``,
``_encode_pair``, ``_model_generate``, ``_multimodal_model_generate``, ``prompt_logprobs``) in
:mod:`harness_ext.answer_logprobs`, :mod:`harness_ext.generate_tokens` and :mod:`harness_ext.multimodal`; and
:mod:`harness_ext.vllm_samples`, which rests on ``evaluate`` repeating a request as copies of one ``Instance`` and
builds a ``vllm`` request as ``VLLM.generate_until`` does (``modify_gen_kwargs``, ``maybe_truncate``,
``postprocess_generated_text``, ``_model_generate``).
"""

from __future__ import annotations

import functools
import inspect
import os
import subprocess
from collections.abc import Callable
from typing import Any

from harness_ext.plugins import include_paths
from harness_ext.startup import step

#: lm-eval's backend (``--model``) -> (class name, module prefix) of its ``LM`` subclass.
BACKENDS: dict[str, tuple[str, str]] = {
    "hf": ("HFLM", "lm_eval.models.huggingface"),
    "vllm": ("VLLM", "lm_eval.models.vllm"),
    "hf-multimodal": ("HFMultimodalLM", "lm_eval.models.hf_vlms"),
    "vllm-vlm": ("VLLM_VLM", "lm_eval.models.vllm_vlms"),
}


def is_backend(lm: Any, backend: str) -> bool:
    """Whether ``lm`` is an instance of lm-eval's class for ``backend`` (a key of :data:`BACKENDS`) or a subclass."""
    class_name, module_prefix = BACKENDS[backend]
    return any(c.__name__ == class_name and c.__module__.startswith(module_prefix) for c in type(lm).__mro__)


def request_options(request: Any, index: int = 2) -> dict:
    """The dict a task passed as argument ``index`` of a request (lm-eval's ``Instance.args``), else ``{}``."""
    args = request.args
    return args[index] if len(args) > index and isinstance(args[index], dict) else {}


def hf_batch_size(lm: Any) -> int:
    """The ``hf`` backend's batch size: ``--batch_size`` when a number, else (``auto``) ``max_batch_size`` or 16."""
    return lm.batch_size if isinstance(lm.batch_size, int) else int(getattr(lm, "max_batch_size", 16) or 16)


# --------------------------------------------------------------------------- task discovery
def patch_task_manager_class(cls: type) -> None:
    """Make ``cls.__init__`` prepend our task folders (:func:`~harness_ext.plugins.include_paths`) to
    ``include_path``, and say that it indexes the tasks and how long that took (:mod:`harness_ext.startup`; lm-eval's
    whole index is the silent minute of a bare ``lm_eval`` start on a busy machine). Idempotent."""
    if getattr(cls.__init__, "_unlearn_patched", False):
        return
    original = cls.__init__
    signature = inspect.signature(original)
    ours = include_paths()  # this package's task folder and the installed benchmarks' (harness_ext.plugins)

    @functools.wraps(original)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        given = bound.arguments.get("include_path")
        given = [] if given is None else list(given) if isinstance(given, (list, tuple)) else [given]
        bound.arguments["include_path"] = [*ours, *[p for p in given if str(p) not in ours]]
        folders = len(bound.arguments["include_path"])
        what = (f"lm-eval's tasks (every YAML it ships) and those of {folders} more folder(s)"
                if bound.arguments.get("include_defaults", True) else f"the tasks of {folders} folder(s)")
        with step(f"Indexing {what} (lm-eval-unlearning's, --include_path)",
                  lambda s: f"Indexed {len(getattr(self, 'task_index', ()))} tasks, groups and tags in {s:.1f} s"):
            original(*bound.args, **bound.kwargs)

    __init__._unlearn_patched = True  # type: ignore[attr-defined]
    cls.__init__ = __init__


# --------------------------------------------------------------------------- request types
def task_manager_with_metadata(base: Any, metadata: dict[str, Any] | None) -> Any:
    """A copy of the ``TaskManager`` ``base`` whose tasks get ``metadata``, without indexing the YAMLs again:
    lm-eval 0.4.13 keeps the metadata in ``_factory`` and the index in ``_index`` (copied: building a group adds
    entries to it). Used by :mod:`harness_ext.task_index`."""
    import copy

    from lm_eval.tasks._factory import TaskFactory

    manager = copy.copy(base)
    manager.metadata = metadata
    manager._factory = TaskFactory(meta=metadata)
    manager._index = dict(base._index)
    return manager


def add_request_types(methods: dict[str, Callable[[Any, list], list]]) -> None:
    """Add each ``name -> method`` to lm-eval's ``LM`` base class, where lm-eval looks a request type up
    (idempotent: a name already there is kept)."""
    from lm_eval.api.model import LM

    for name, method in methods.items():
        if not hasattr(LM, name):
            setattr(LM, name, method)


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


def patch_hf_data_parallel(cls: type) -> None:
    """lm-eval 0.4.13's ``HFLM`` splits the requests over the processes of ``accelerate launch`` only when CUDA
    counts more than one GPU: CPU processes (``ACCELERATE_USE_CPU=true``, where accelerate joins them over gloo) would
    each evaluate everything and each write the results. Wrap ``cls.__init__`` (``HFLM``, which ``hf-multimodal``
    subclasses) so that CPU processes take their rank and the world size from the accelerator ``HFLM`` built, the
    state its GPU path sets (idempotent)."""
    if getattr(cls.__init__, "_unlearn_patched", False):
        return
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        accelerator = getattr(self, "accelerator", None)
        if (accelerator is not None and getattr(self, "_world_size", 1) == 1 and accelerator.num_processes > 1
                and accelerator.device.type == "cpu"):
            self._rank = accelerator.local_process_index
            self._world_size = accelerator.num_processes

    __init__._unlearn_patched = True  # type: ignore[attr-defined]
    cls.__init__ = __init__


def in_document_order(items: list, world_size: int) -> list:
    """``items`` (one value per document, as lm-eval 0.4.13's ``evaluate`` hands them to an aggregation on the main
    process of a ``world_size``-process launch) in document order. Process ``r`` scores documents ``r, r + W,
    r + 2W, ...`` (``Task.doc_iterator``: ``islice(docs, r, limit, W)``) and the main process concatenates the
    processes' lists in rank order (``gather_object``), so document ``p`` sits at the offset of process ``p % W``
    plus ``p // W``. One process (``world_size`` 1): ``items`` unchanged."""
    n, w = len(items), max(int(world_size), 1)
    if w == 1:
        return list(items)
    counts = [len(range(r, n, w)) for r in range(w)]
    offsets = [sum(counts[:r]) for r in range(w)]
    return [items[offsets[p % w] + p // w] for p in range(n)]


def drop_padding_responses(instances: list) -> None:
    """Keep each request's own ``repeats`` responses. Under a launcher lm-eval 0.4.13's ``evaluate`` evens out the
    processes' request counts by sending a process with fewer requests extra copies of the last request of a request
    type, and appends their answers to that request's ``resps``: a filter keeping every response (WaterDrum's K
    generations) would count them, and the samples file logs them."""
    for inst in instances:
        repeats = inst.repeats or 1
        if len(inst.resps) > repeats:
            del inst.resps[repeats:]


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


__all__ = ["BACKENDS", "add_request_types", "cache_env_info", "drop_padding_responses", "hf_batch_size",
           "in_document_order", "is_backend", "patch_multimodal_generation", "patch_task_manager_class",
           "quiet_git_hash", "request_options"]
