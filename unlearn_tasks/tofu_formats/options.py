"""The switches of a ReLU task, read from its metadata (task YAML ``metadata`` + ``--metadata`` + model args).

The ``relu_`` prefix keeps them apart from the TOFU tasks' keys, since ``--metadata`` reaches every task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from unlearn_tasks.metadata import MetadataOptions
from unlearn_tasks.settings import param
from unlearn_tasks.tofu.splits import FORGET_SPLITS
from unlearn_tasks.tofu_formats.formats import FORMATS, HUB_ID, MODES, RETAIN_OF, Format, retain_of

#: Every split of any format (the comprehension formats add ``full``); the format's own are checked in validate().
ALL_SPLITS = tuple(dict.fromkeys(split for fmt in FORMATS.values() for split in fmt.splits))


@dataclass
class ReluOptions(MetadataOptions):
    WHERE = "ReLU task"
    #: The ``relu_`` keys and the fields they fill; ``data_dir`` is read too when ``relu_data_dir`` is absent.
    RENAMED = {"relu_format": "format", "relu_splits": "splits", "relu_options": "n_options", "relu_mode": "mode",
               "relu_pair": "pair", "relu_data_dir": "data_dir", "relu_dataset_path": "dataset_path"}
    EXTRA_KEYS = frozenset({"version", "data_dir"})
    DERIVED = frozenset({"tokenizer", "tokenizer_kwargs"})

    format: str = param(None, "the format (set by each task YAML)", choices=tuple(FORMATS), required=True)
    splits: list[str] = param([], "one split, or a forget and its retain split for a pair task (set by each task "
                              "YAML)", choices=ALL_SPLITS)
    n_options: int | None = param(None, "the number of options of a multiple-choice format (set by each task YAML)")
    mode: str = param("default", "default: this package's scoring; parity: reproduces the release (its prompts, cloze "
                      "scoring and budgets, see below)", choices=MODES)
    pair: str | None = param(None, "the forget split of a pair task, with its retain split (forget05 with "
                             "retain95); default the task YAML's, forget10", choices=FORGET_SPLITS)
    data_dir: str | None = param(None, "a local copy (below); wins over data_dir, so TOFU's and ReLU's copies can "
                                 "live apart")
    dataset_path: str = param(HUB_ID, "another Hub id with the same layout")
    max_items_per_split: int | None = param(None, "keep the first N items of every split", ge=1)
    tokenizer: str | None = None
    tokenizer_kwargs: dict[str, Any] = field(default_factory=dict)

    def complete(self, metadata: dict[str, Any]) -> None:
        """``relu_pair`` picks a pair task's forget split (its retain split follows); ``data_dir`` stands in for
        ``relu_data_dir``; the tokenizer (comprehension QA's budget, parity-mode cloze) comes from the model
        arguments (``pretrained=`` or ``tokenizer``)."""
        if len(self.splits) == 2 and isinstance(self.pair, str) and self.pair in RETAIN_OF:
            self.splits = [self.pair, retain_of(self.pair)]
        self.data_dir = self.data_dir or metadata.get("data_dir")
        self.mode = self.mode or "default"
        self.dataset_path = self.dataset_path or HUB_ID
        tokenizer = metadata.get("tokenizer") or metadata.get("pretrained")
        self.tokenizer = tokenizer if isinstance(tokenizer, str) else None
        self.tokenizer_kwargs = {k: metadata[k] for k in ("revision", "trust_remote_code") if metadata.get(k) is not None}

    @property
    def fmt(self) -> Format:
        return FORMATS[self.format]

    @property
    def is_pair(self) -> bool:
        return len(self.splits) == 2

    def roles(self) -> list[tuple[str, str]]:
        """(role, split) per evaluated split: role is forget/retain in a pair task, else the split itself."""
        if self.is_pair:
            return [("forget", self.splits[0]), ("retain", self.splits[1])]
        return [(self.splits[0], self.splits[0])]

    def validate(self) -> None:
        fmt = FORMATS.get(self.format)
        checks = [  # what depends on the format or on two keys (the rest comes from the fields' declarations)
            (len(self.splits) in (1, 2), "relu_splits must name one split, or a forget and a retain split"),
            (fmt is None or set(self.splits) <= set(fmt.splits), f"splits must be among {fmt and fmt.splits}"),
            (fmt is None or (self.n_options in fmt.options if fmt.options else self.n_options is None),
             f"relu_options must be one of {fmt and fmt.options}"),
            (not self.is_pair or self.splits[1] == RETAIN_OF.get(self.splits[0]),
             f"a pair task needs a forget split and its retain split, one of {RETAIN_OF}; relu_pair picks it"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"ReLU task option: {message} (got {self}; check --metadata / the task YAML).")
