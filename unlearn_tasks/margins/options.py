"""The options of the ``margins_*`` tasks, read from their metadata (task YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_tasks.metadata import MetadataOptions, check_positive_int

BENCHMARKS = ("tofu", "file")
REDUCTIONS = ("mean", "sum")


@dataclass
class MarginOptions(MetadataOptions):
    WHERE = "margins task"

    benchmark: str = "file"
    forget_split: str = "forget10"
    dataset_path: str | None = None
    data_dir: str | None = None
    data_file: str | None = None
    prompt_field: str = "prompt"
    target_field: str = "target"
    text_field: str = "text"
    split_field: str = "split"
    max_items_per_split: int | None = None
    reduction: str = "mean"
    include_eos: bool = False
    keep_token_margins: bool = False

    def validate(self) -> None:
        check_positive_int(self.max_items_per_split, "max_items_per_split", "margins task option")
        checks = [
            (self.benchmark in BENCHMARKS, f"benchmark must be one of {BENCHMARKS}"),
            (self.reduction in REDUCTIONS, f"reduction must be one of {REDUCTIONS}"),
            (self.benchmark != "file" or bool(self.data_file),
             'the generic margins task needs a data file: --metadata \'{"data_file": "FILE.jsonl"}\' (JSON lines of '
             '{"prompt": ..., "target": ...} or {"text": ...}, optional "split")'),
        ]
        self.require(checks)
