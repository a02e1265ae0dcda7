"""The options of the ``evaldu`` and ``mquake_du`` tasks, read from their metadata (task YAML ``metadata`` +
``--metadata``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from unlearn_tasks.metadata import MetadataOptions
from unlearn_tasks.settings import param

BENCHMARKS = ("evaldu", "mquake")
#: Where the upstream release lies under ``$UNLEARN_DATA_DIR``.
RELEASE_HUB_PATH = Path("wrh14") / "deep_unlearning"


def resolve_data_dir(data_dir: str | None) -> Path | None:
    """The Eval-DU folder to load: ``data_dir`` if given, else ``$UNLEARN_DATA_DIR/wrh14/deep_unlearning`` (here, in
    a module without lm-eval or datasets, so that ``unlearn deep-unlearning`` finds it in a second)."""
    if data_dir:
        return Path(data_dir).expanduser()
    root = os.environ.get("UNLEARN_DATA_DIR")
    if root and (Path(root) / RELEASE_HUB_PATH).is_dir():
        return Path(root) / RELEASE_HUB_PATH
    return None


@dataclass
class DeepUnlearningOptions(MetadataOptions):
    WHERE = "Deep unlearning task"

    benchmark: str = param("evaldu", "evaldu: Eval-DU's knowledge base; mquake: MQuAKE's (set by each task YAML)",
                           choices=BENCHMARKS)
    data_dir: str | None = param(None, "evaldu: an Eval-DU JSON folder or a clone of the upstream release "
                                 "(wrh14/deep_unlearning); default $UNLEARN_DATA_DIR/wrh14/deep_unlearning")
    mquake_path: str | None = param(None, "mquake: a local MQuAKE JSON file such as MQuAKE-CF-3k-v2.json")
    target: int | str | None = param(None, "one relationship fact id (e.g. 272); without it every metric is the mean "
                                     "over all targets of the knowledge base (55 for Eval-DU)")
    fix_rule_typos: bool = param(False, "evaldu: repair the release's newphe rule typo")
