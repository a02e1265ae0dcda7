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
- :func:`share_last_checkpoint` gives the finished folder the last checkpoint's model files (weights and
  configuration) as hard links when they are the final model: the last step's state is written once, and both the
  folder (what lm-eval and ``unlearn push`` read) and the checkpoint (what ``--resume`` with more epochs reads)
  hold it. :func:`remove_model_files` clears them before a model is saved over them, so a write never goes through
  a link into a checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
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


class BackgroundCheckpoints:
    """Trainer mixin (before ``Trainer`` in the bases): each checkpoint's model files and optimizer state are written
    by a writer thread while the next step's forward and backward passes run (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._writer: ThreadPoolExecutor | None = None
        self._writes: list[Future] = []
        self._in_checkpoint = False  # the parts written now belong to a checkpoint (not save_model's own calls)
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
    def _save_checkpoint(self, model, trial) -> None:
        self.wait_for_checkpoint()  # the one before: its folder may be rotated away below
        self._in_checkpoint = self.background_writes()
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._in_checkpoint = False

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
    """The checkpoint the Trainer wrote at its last step, or None (no checkpoint of that step)."""
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
