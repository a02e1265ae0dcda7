"""The options of the ``margins_*`` tasks, read from their metadata (task YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_tasks.metadata import MetadataOptions
from unlearn_tasks.settings import param
from unlearn_tasks.tofu.splits import FORGET_SPLITS

BENCHMARKS = ("tofu", "file")
REDUCTIONS = ("mean", "sum")


@dataclass
class MarginOptions(MetadataOptions):
    WHERE = "margins task"

    benchmark: str = param("file", "tofu: TOFU's forget, retain_perturbed and holdout sets (margins_tofu_*); file: "
                           "records of a local file (data_file); set by each task YAML", choices=BENCHMARKS)
    forget_split: str = param("forget10", "TOFU's forget split (benchmark tofu)", choices=FORGET_SPLITS)
    dataset_path: str | None = param(None, "another Hub id in TOFU's schema (benchmark tofu)")
    data_dir: str | None = param(None, "a local copy of TOFU (benchmark tofu)")
    data_file: str | None = param(None, "a JSON or JSON-lines file of {\"prompt\": ..., \"target\": ...} or "
                                  "{\"text\": ...} records, each with an optional \"split\" (benchmark file)")
    prompt_field: str = param("prompt", "the records' prompt field (benchmark file)")
    target_field: str = param("target", "the records' target field (benchmark file)")
    text_field: str = param("text", "the records' text field, a target with no prompt (benchmark file)")
    split_field: str = param("split", "the records' split field (benchmark file)")
    max_items_per_split: int | None = param(None, "keep the first N records of every split", ge=1)
    reduction: str = param("mean", "how the target tokens' margins make the record's margin", choices=REDUCTIONS)
    include_eos: bool = param(False, "count the margin of the EOS appended to the target too")
    keep_token_margins: bool = param(False, "write the per-token margins into the record too")

    def validate(self) -> None:
        checks = [
            (self.benchmark != "file" or bool(self.data_file),
             'the generic margins task needs a data file: --metadata \'{"data_file": "FILE.jsonl"}\' (JSON lines of '
             '{"prompt": ..., "target": ...} or {"text": ...}, optional "split")'),
        ]
        self.require(checks)
