"""Start-up hook that lets a bare ``lm_eval --tasks tofu_forget10`` find this package's tasks.

lm-eval 0.4.13 only scans its own task folder and ``--include_path``. The wheel ships
``lm_eval_unlearning.pth``, which imports this module at interpreter start. It does **not** import lm-eval:
it adds a post-import hook, so that when ``lm_eval.tasks.manager`` is first imported, ``TaskManager`` gets our
task folder, and those of the benchmarks installed through the ``lm_eval_unlearning.benchmarks`` entry points
(:mod:`harness_ext.plugins`), prepended to its ``include_path`` (a user's own ``--include_path`` still wins on name
clashes). When lm-eval's ``hf`` backend is imported, CPU processes under ``accelerate launch`` are made to split its
requests as GPU processes do (:func:`harness_ext.lm_eval_patches.patch_hf_data_parallel`).
While ``lm_eval`` starts, the hook says what it is doing before lm-eval's own first line (loading its evaluator,
indexing the tasks: :mod:`harness_ext.startup`). Set ``UNLEARN_LMEVAL_AUTOLOAD=0`` to switch it off. :func:`when_imported` lets our tasks patch lm-eval modules when
lm-eval imports them, whatever the switch says. All lm-eval-internal knowledge lives in this module and
:mod:`harness_ext.lm_eval_patches`.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable
from types import ModuleType

ENV_SWITCH = "UNLEARN_LMEVAL_AUTOLOAD"
_TARGET = "lm_eval.tasks.manager"
#: lm-eval's ``hf`` backend: CPU processes under ``accelerate launch`` split its requests (see
#: :func:`harness_ext.lm_eval_patches.patch_hf_data_parallel`).
_HF_TARGET = "lm_eval.models.huggingface"


def _enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in {"0", "false", "no", "off"}


def patch_task_manager(module: ModuleType) -> None:
    """Wrap ``TaskManager.__init__`` so our task folders are always on the include path."""
    from harness_ext.lm_eval_patches import patch_task_manager_class
    from harness_ext.quiet import silence

    patch_task_manager_class(module.TaskManager)
    silence()  # before lm-eval loads a model (transformers / peft import torchao)


def patch_hf_backend(module: ModuleType) -> None:
    """Let CPU processes under a launcher split ``HFLM``'s requests as GPUs do."""
    from harness_ext.lm_eval_patches import patch_hf_data_parallel

    patch_hf_data_parallel(module.HFLM)


#: The start-up hook's patches, by module (installed by :func:`install` unless switched off).
_STARTUP: dict[str, Callable[[ModuleType], None]] = {_TARGET: patch_task_manager, _HF_TARGET: patch_hf_backend}
#: lm-eval's module whose import loads torch and transformers (the ``lm_eval`` command imports it after setting its
#: logging up, before it indexes the tasks), and what the start-up hook says before it loads.
_SLOW_IMPORTS: dict[str, str] = {
    "lm_eval.evaluator": "Loading torch, transformers and lm-eval's evaluator",
}
#: module -> the patches to run when it is imported: the start-up hook's and those of :func:`when_imported`.
_PATCHES: dict[str, list[Callable[[ModuleType], None]]] = {}


class _LoaderWithHook(importlib.abc.Loader):
    def __init__(self, wrapped: importlib.abc.Loader, patches: list[Callable[[ModuleType], None]],
                 announce: str | None = None) -> None:
        self._wrapped = wrapped
        self._patches = patches
        self._announce = announce

    def create_module(self, spec):  # noqa: D401 - loader protocol
        return self._wrapped.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if self._announce:
            from harness_ext.startup import say

            say(self._announce)
        self._wrapped.exec_module(module)
        for patch in list(self._patches):
            patch(module)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of a module of :data:`_PATCHES` to run its patches after it (and,
    with the hook on, to say first what a module of :data:`_SLOW_IMPORTS` loads)."""

    def find_spec(self, fullname, path, target=None):
        announce = _SLOW_IMPORTS.get(fullname)
        if announce is not None and not _enabled():
            announce = None
        if fullname not in _PATCHES and announce is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _LoaderWithHook(spec.loader, _PATCHES.setdefault(fullname, []), announce)
        return spec


def _install_finder() -> None:
    if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())


def when_imported(name: str, patch: Callable[[ModuleType], None]) -> None:
    """Run ``patch(module)`` on the module ``name``: now if it is imported, else right after it is (whatever
    ``UNLEARN_LMEVAL_AUTOLOAD`` says). Lets a task patch lm-eval's backends without importing them (and torch,
    transformers) itself. ``patch`` must be idempotent; a patch already registered for ``name`` is not added twice."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    patches = _PATCHES.setdefault(name, [])
    if patch not in patches:
        patches.append(patch)
    _install_finder()


def install() -> None:
    """Install the hook (idempotent). Patches at once the modules of lm-eval it patches that are already imported."""
    if not _enabled():
        return
    for name, patch in _STARTUP.items():
        if name in sys.modules:
            patch(sys.modules[name])
        else:
            when_imported(name, patch)


install()
