"""The switches of a MUSE Leak@k evaluation (``muse_{news,books}_{knowmem,verbmem}_leak``), read from the task's
metadata."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unlearn_tasks.leak_task import MAX_NEW_TOKENS, AnswerLeakOptions
from unlearn_tasks.muse.corpora import HUB_IDS
from unlearn_tasks.settings import param

#: The parts sampled (their forget sets) and the release's most new tokens for each (its MUSE metric configs
#: ``forget_knowmem_ROUGE.yaml`` and ``forget_verbmem_ROUGE.yaml``).
PART_MAX_NEW_TOKENS = {"knowmem": 32, "verbmem": 128}


@dataclass
class MuseLeakOptions(AnswerLeakOptions):
    """Leak@k on MUSE's forget sets; defaults are the Leak-k release's."""

    WHERE = "MUSE Leak@k task"

    corpus: str = param("news", "the corpus (set by each task YAML)", choices=tuple(HUB_IDS))
    part: str = param("knowmem", "knowmem: the forget QA questions; verbmem: the forget passages' prefixes (set "
                      "by each task YAML)", choices=tuple(PART_MAX_NEW_TOKENS))
    dataset_path: str | None = param(None, "another Hub id in MUSE's layout")
    data_dir: str | None = param(None, "a local copy laid out like the Hub repository (see the MUSE tasks)")
    muse_data_dir: str | None = param(None, "wins over data_dir, as for the MUSE tasks")
    max_items_per_split: int | None = param(None, "keep the first N forget items", ge=1)
    leak_max_new_tokens: int | None = param(None, "most tokens generated per sample (default: the release's, 32 "
                                            "for knowmem, 128 for verbmem)", ge=1, le=MAX_NEW_TOKENS)

    def complete(self, metadata: dict[str, Any]) -> None:
        if self.leak_max_new_tokens is None:
            self.leak_max_new_tokens = PART_MAX_NEW_TOKENS.get(self.part)
