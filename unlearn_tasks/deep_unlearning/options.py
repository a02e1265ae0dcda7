"""The options of the ``evaldu`` and ``mquake_du`` tasks, read from their metadata (task YAML ``metadata`` +
``--metadata``); see :mod:`unlearn_tasks.deep_unlearning.task` for what each does."""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_tasks.metadata import MetadataOptions


@dataclass
class DeepUnlearningOptions(MetadataOptions):
    WHERE = "Deep unlearning task"

    benchmark: str = "evaldu"  # "mquake" for mquake_du
    data_dir: str | None = None  # Eval-DU JSON folder or a clone of the upstream release
    mquake_path: str | None = None  # a local MQuAKE JSON file
    target: int | str | None = None  # one relationship fact id; None: the mean over every target
    fix_rule_typos: bool = False
