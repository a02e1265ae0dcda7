"""A run's resumable checkpoints at a fixed cost: written beside the steps, and the last one shared with the
finished folder.

The Trainer writes a checkpoint every epoch (or ``--save-steps``) and at the last step into
``OUT.partial/checkpoints/checkpoint-STEP``: the weights, the optimizer's state (AdamW's two moments: twice the
weights), the scheduler, the RNG states and its own state, which ``--resume`` continues from.

- :class:`BackgroundCheckpoints` (a Trainer mixin) hands the two large parts, the model files and the optimizer's
  and scheduler's states, to one writer thread and goes on with the next step at once. That step's forward and
  backward passes read the weights and write only activations and gradients; its optimizer step, the first write to
  the weights or the optimizer's state, waits for the writer (``on_pre_optimizer_step``). The RNG states and the
  Trainer's state are written at once, as the Trainer writes them, so the checkpoint holds the state of the step it
  is named after. The end of training, an error and Ctrl-C wait for the writer too: a stopped run keeps a complete
  checkpoint. Nothing is copied (the files are written from the tensors in place). A sharded run (FSDP, DeepSpeed
  ZeRO) saves through collectives that every process takes part in; it writes in step, as the Trainer does.
- A checkpoint is complete or absent: every process writes it into ``checkpoints/.writing/checkpoint-STEP``; once
  all of them have (a barrier) and its files are written, the main process fsyncs them and renames the folder to
  ``checkpoints/checkpoint-STEP`` (:func:`complete_checkpoint`). A kill (OOM, preemption) mid-write leaves it under
  ``.writing``, which nothing that looks for checkpoints reads (the Trainer's ``get_last_checkpoint`` and rotation,
  :func:`last_checkpoint`); ``--resume`` names it, removes it (:func:`discard_incomplete`) and goes on from the
  newest complete one. Older checkpoints are rotated away (``save_total_limit``) only once a newer one is complete.
- :func:`share_last_checkpoint` gives the finished folder the last checkpoint's model files (weights and
  configuration) as hard links when they are the final model: the last step's state is written once, and both the
  folder (what lm-eval and ``unlearn push`` read) and the checkpoint (what ``--resume`` with more epochs reads)
  hold it. :func:`remove_model_files` clears them before a model is saved over them, so a write never goes through
  a link into a checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint
from transformers.utils import (
    ADAPTER_CONFIG_NAME,
    ADAPTER_SAFE_WEIGHTS_NAME,
    ADAPTER_WEIGHTS_NAME,
    CONFIG_NAME,
    GENERATION_CONFIG_NAME,
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
)

#: The files ``save_pretrained`` writes for a model or a PEFT adapter, besides the shards its index files name.
MODEL_FILES = (CONFIG_NAME, GENERATION_CONFIG_NAME, SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME,
               WEIGHTS_INDEX_NAME, ADAPTER_CONFIG_NAME, ADAPTER_SAFE_WEIGHTS_NAME, ADAPTER_WEIGHTS_NAME)
#: The folder, inside the Trainer's checkpoints folder, where checkpoints are written before they are complete.
STAGING = ".writing"
_CHECKPOINT = re.compile(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)")


class BackgroundCheckpoints:
    """Trainer mixin (before ``Trainer`` in the bases): each checkpoint's model files and optimizer state are written
    by a writer thread while the next step's forward and backward passes run, and every checkpoint appears complete or
    not at all (see the module docstring)."""

    _in_checkpoint = False  # the parts written now belong to a checkpoint (not save_model's own calls)
    _staging = False  # the Trainer's checkpoint is being written (into STAGING)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._writer: ThreadPoolExecutor | None = None
        self._writes: list[Future] = []
        self.add_callback(_WaitBeforeOptimizerStep(self))

    def background_writes(self) -> bool:
        """Whether checkpoints are written beside the steps: not when the processes hold shards of the weights."""
        return not (self.is_fsdp_enabled or self.is_deepspeed_enabled)

    def wait_for_checkpoint(self) -> None:
        """Return once the checkpoint being written is on disk; raise the writer's error if it failed."""
        writes, self._writes = self._writes, []
        for write in writes:
            write.result()

    def train(self, *args: Any, **kwargs: Any):
        try:
            result = super().train(*args, **kwargs)
        except BaseException:
            self._finish_writes(keep_error=False)  # the error that stopped training is the one to report
            raise
        self._finish_writes(keep_error=True)
        if self.args.should_save:  # every checkpoint renamed out of it (the last one's barrier passed)
            with contextlib.suppress(OSError):
                os.rmdir(Path(self.args.output_dir) / STAGING)
        return result

    def _finish_writes(self, keep_error: bool) -> None:
        try:
            self.wait_for_checkpoint()
        except Exception:
            if keep_error:
                raise
        finally:
            if self._writer is not None:
                self._writer.shutdown()
                self._writer = None

    def _submit(self, write, *args: Any) -> None:
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-writer")
        self._writes.append(self._writer.submit(write, *args))

    # ------------------------------------------------------------------ the Trainer's checkpoint, in two threads
    def _get_output_dir(self, trial) -> str:
        run_dir = super()._get_output_dir(trial)
        return os.path.join(run_dir, STAGING) if self._staging else run_dir

    def _save_checkpoint(self, model, trial) -> None:
        self.wait_for_checkpoint()  # the one before is complete (renamed into place) before this one starts
        background = self.background_writes()
        staged = Path(self._get_output_dir(trial)) / STAGING / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        self._in_checkpoint, self._staging = background, True
        try:
            super()._save_checkpoint(model, trial)  # into `staged` (the Trainer's rotation finds nothing there)
        finally:
            self._in_checkpoint = self._staging = False
        self.accelerator.wait_for_everyone()  # every process has written its part (its RNG state, its shard)
        if not self.args.should_save:
            return
        if background:  # after the model and optimizer files (one writer: in order), if they were written
            self._submit(complete_checkpoint, staged, self.args.save_total_limit, list(self._writes))
        else:
            complete_checkpoint(staged, self.args.save_total_limit)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        if not self._in_checkpoint:
            return super()._save(output_dir, state_dict)
        if self.args.should_save:
            os.makedirs(output_dir, exist_ok=True)  # the RNG and Trainer states are written there at once
        self._submit(super()._save, output_dir, state_dict)

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        if not self._in_checkpoint:
            return super()._save_optimizer_and_scheduler(output_dir)
        self._submit(super()._save_optimizer_and_scheduler, output_dir)


class _WaitBeforeOptimizerStep(TrainerCallback):
    def __init__(self, trainer: BackgroundCheckpoints) -> None:
        self.trainer = trainer

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.trainer.wait_for_checkpoint()


# ------------------------------------------------------------------------------------ complete or absent
def complete_checkpoint(staged: Path, keep: int | None, writes: Sequence[Future] = ()) -> Path:
    """Once ``writes`` (the checkpoint's parts written by the writer thread) succeeded: fsync ``staged``'s files,
    rename it from ``STAGING`` into the checkpoints folder (an earlier folder of that step replaced as a whole),
    then remove the oldest checkpoints beyond ``keep``. Returns the checkpoint."""
    for write in writes:
        write.result()  # a part that failed: the checkpoint stays incomplete, and the error is reported
    _fsync_tree(staged)
    target = staged.parent.parent / staged.name
    if target.exists():
        aside = staged.with_name(f"replaced-{staged.name}")
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(target, aside)
        os.replace(staged, target)
        shutil.rmtree(aside)
    else:
        os.replace(staged, target)
    _fsync(target.parent)
    if keep:
        steps = sorted((int(m.group(1)), path) for path in target.parent.iterdir()
                       if (m := _CHECKPOINT.fullmatch(path.name)) and path.is_dir())
        for _, old in steps[:-keep]:  # moved out of sight first: a kill mid-removal leaves no partial checkpoint
            removing = staged.with_name(f"removing-{old.name}")
            os.replace(old, removing)
            shutil.rmtree(removing, ignore_errors=True)
    return target


def newest_complete(checkpoints: Path) -> Path | None:
    """The newest complete checkpoint in the Trainer's ``checkpoints`` folder (those under ``STAGING`` are not), or
    None: no such folder or no checkpoint in it."""
    found = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    return Path(found) if found else None


def discard_incomplete(checkpoints: Path) -> list[str]:
    """Remove the checkpoints whose writing did not finish (a run killed while writing them) from the Trainer's
    ``checkpoints`` folder. Returns their names, oldest first."""
    staging = checkpoints / STAGING
    if not staging.is_dir():
        return []
    names = sorted((p.name for p in staging.iterdir() if _CHECKPOINT.fullmatch(p.name)),
                   key=lambda name: int(_CHECKPOINT.fullmatch(name).group(1)))
    shutil.rmtree(staging)
    return names


def _fsync_tree(folder: Path) -> None:
    """Flush every file and folder under ``folder`` to the disk (a rename after a power loss or a killed machine
    then names complete files)."""
    for root, _, files in os.walk(folder, topdown=False):
        for name in files:
            _fsync(Path(root) / name)
        _fsync(Path(root))


def _fsync(path: Path) -> None:
    if path.is_dir() and os.name != "posix":  # folders cannot be opened for fsync elsewhere
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------- the last checkpoint
def model_files(folder: Path) -> list[str]:
    """The names of the model files ``save_pretrained`` wrote in ``folder`` (weights, their shards, configs)."""
    names = [name for name in MODEL_FILES if (folder / name).is_file()]
    for index in (SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME):
        if index in names:
            names += sorted(set(json.loads((folder / index).read_text())["weight_map"].values()))
    return names


def remove_model_files(folder: Path) -> None:
    """Remove ``folder``'s model files, which may be links into a checkpoint, before a model is saved there."""
    for name in model_files(folder):
        (folder / name).unlink()


def last_checkpoint(trainer: Any) -> Path | None:
    """The checkpoint the Trainer wrote at its last step, or None (no complete checkpoint of that step)."""
    folder = Path(trainer.args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{trainer.state.global_step}"
    return folder if folder.is_dir() else None


def share_last_checkpoint(checkpoint: Path, out: Path) -> bool:
    """Give ``out`` the model files of ``checkpoint`` (a model the Trainer saved) as hard links (copies on a file
    system without them), in place of any there. False, changing nothing, when the checkpoint has no weights or
    its model has code of its own (``save_pretrained`` copies that code too)."""
    names = model_files(checkpoint)
    weights = {SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME, WEIGHTS_INDEX_NAME, ADAPTER_SAFE_WEIGHTS_NAME,
               ADAPTER_WEIGHTS_NAME}
    config = checkpoint / CONFIG_NAME
    if not weights & set(names) or (config.is_file() and "auto_map" in json.loads(config.read_text())):
        return False
    remove_model_files(out)
    for name in names:
        _link(checkpoint / name, out / name)
    return True


def _link(source: Path, target: Path) -> None:
    staged = target.with_name(f".{target.name}.linking")
    staged.unlink(missing_ok=True)
    try:
        os.link(source, staged)
    except OSError:  # no hard links here (some network or FAT file systems): the file written again
        shutil.copy2(source, staged)
    os.replace(staged, target)
