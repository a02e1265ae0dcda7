"""Shared base of the benchmark task classes: a ConfigurableTask whose metrics are corpus-level aggregations of
per-document records, and which writes its per-item data into lm-eval's results file (``configs.<task>``) so that
later runs and the ``unlearn`` reports can read it."""

from __future__ import annotations

from typing import Any, ClassVar

from lm_eval.api.task import ConfigurableTask


class CorpusTask(ConfigurableTask):
    #: The key under ``configs.<task>`` of the results file that holds :meth:`results_record`.
    RESULTS_KEY: ClassVar[str] = ""
    #: The key under ``configs.<task>`` that lists :attr:`run_warnings` (what a reader of the numbers must know).
    WARNINGS_KEY: ClassVar[str] = "unlearning_warnings"
    run_warnings: list[str]

    def results_record(self) -> dict[str, Any] | None:
        """Per-item data computed during aggregation, or None (nothing is written)."""
        return None

    def dump_config(self) -> dict:
        config = super().dump_config()
        record = self.results_record()
        if record is not None:
            config[self.RESULTS_KEY] = record
        if getattr(self, "run_warnings", None):
            config[self.WARNINGS_KEY] = list(self.run_warnings)
        return config
