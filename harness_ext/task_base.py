"""One base class for every benchmark task class, on lm-eval's public ``Task`` API.

A benchmark's metrics are corpus-level numbers computed from per-document records (Forget Quality needs every
forget item at once, a watermark is verified over the whole corpus, deep unlearning needs every fact). lm-eval
calls ``process_results`` per document and then each metric's aggregation over the list of what
``process_results`` returned; :class:`UnlearningTask` turns that into two methods a benchmark writes:

* :meth:`~UnlearningTask.score_document`: one record per document (whatever the corpus metrics need);
* :meth:`~UnlearningTask.compute_metrics`: every metric from the list of records, computed once per run.

Under a launcher (``accelerate launch -m lm_eval``) each process scores its share of the documents and the main
process gathers the records, process by process; :meth:`~UnlearningTask.compute_metrics` gets them back in document
order, as on one process (:func:`harness_ext.lm_eval_patches.in_document_order`), and each request's responses
without the answers to lm-eval's padding requests (:func:`~harness_ext.lm_eval_patches.drop_padding_responses`).

Per-item data that later runs or reports need (reference truth ratios, per-fact correctness, ...) is returned by
:meth:`~UnlearningTask.results_record` and written by lm-eval into the results file under
``configs.<task>.<RESULTS_KEY>``. Options come from the task's ``metadata`` (YAML and ``--metadata``) and are
parsed by :meth:`~UnlearningTask.setup` before lm-eval loads the documents.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar

from lm_eval.api.task import ConfigurableTask

from harness_ext import provenance
from harness_ext.input_errors import install_input_error_hook
from harness_ext.instances import output_type_class, responses_per_request
from harness_ext.lm_eval_metrics import mean
from harness_ext.lm_eval_patches import drop_padding_responses, in_document_order
from harness_ext.lm_eval_version import LM_EVAL_05
from harness_ext.request_types import install_request_types
from harness_ext.startup import say

#: Options that say where data or the model come from, not how a metric is computed (kept out of ``metric_modes``):
#: names containing one of these, or equal to one of the second set.
_LOCATION_PARTS = ("_dir", "path", "reference")
_LOCATION_NAMES = {"tokenizer", "model_tokenizer", "repo_id", "workers"}


class UnlearningTask(ConfigurableTask):
    """Base of the benchmark task classes (TOFU, ReLU formats, WaterDrum, deep unlearning, ...)."""

    #: The key under ``configs.<task>`` of the results file that holds :meth:`results_record`.
    RESULTS_KEY: ClassVar[str] = ""
    #: The key under ``configs.<task>`` that lists :attr:`run_warnings` (what a reader of the numbers must know).
    WARNINGS_KEY: ClassVar[str] = "unlearning_warnings"

    def __new__(cls, config: dict | None = None, **kwargs: Any) -> UnlearningTask:
        """On lm-eval 0.5 an instance of ``cls`` mixed with lm-eval's class for its output type (where lm-eval's own
        requests and scoring of ``multiple_choice``, ``generate_until`` ... live since 0.4.13's ``ConfigurableTask``
        was split); on 0.4.13 of ``cls``."""
        base = output_type_class((config or {}).get("output_type") or cls.OUTPUT_TYPE)
        if base is not None and not issubclass(cls, base):
            cls = _with_base(cls, base)
        return super().__new__(cls)

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        install_request_types()
        install_input_error_hook()
        config = {k: v for k, v in (config or {}).items() if k != "class"}  # lm-eval's PY_TASK key, not a field
        self.run_warnings: list[str] = []  # set in compute_metrics, written into the results file
        with provenance.recording() as self.data_sources:  # what the loaders read while the task is built
            self.setup(config)
            # lm-eval's default filter (no filter_list) keeps each request's first response (0.4.13's take_first)
            self._takes_first = config.get("filter_list") is None
            super().__init__(config=config, **kwargs)
        self._computed: tuple[int, dict[str, float]] | None = None
        self._world_size = 1  # the processes the documents are split over (build_all_requests)

    # ------------------------------------------------------------------ what a benchmark writes
    def setup(self, config: dict) -> None:
        """Parse options from ``config["metadata"]`` (may edit ``config``); runs before the documents load."""

    def metric_names(self) -> list[str]:
        """The metrics this task reports."""
        raise NotImplementedError

    def lower_is_better(self) -> set[str]:
        """The metrics for which a lower value means better unlearning (all others: higher is better)."""
        return set()

    def score_document(self, doc: dict, results: list) -> Any:
        """One document's record from the backend's responses."""
        raise NotImplementedError

    def compute_metrics(self, records: list) -> dict[str, float]:
        """Every metric of :meth:`metric_names` from all documents' records (called once per run)."""
        raise NotImplementedError

    def results_record(self) -> dict[str, Any] | None:
        """Per-item data computed in :meth:`compute_metrics` to keep in the results file, or None."""
        return None

    def metric_modes(self) -> dict[str, Any]:
        """The switches that change how metrics are computed (default: the scalar fields of ``self.options``
        that are not data locations)."""
        options = getattr(self, "options", None)
        if options is None or not dataclasses.is_dataclass(options):
            return {}
        return {k: v for k, v in dataclasses.asdict(options).items()
                if isinstance(v, (str, int, float, bool, type(None))) and k not in _LOCATION_NAMES
                and not any(part in k for part in _LOCATION_PARTS)}

    def reference_used(self) -> dict[str, Any] | None:
        """The reference run the metrics were computed against (path and content hash), or None."""
        return None

    def provenance(self) -> dict[str, Any]:
        """Package version, git commit, data read, metric modes and reference: ``configs.<task>.provenance``."""
        return provenance.task_record(self.data_sources, self.metric_modes(), self.reference_used())

    def chat_messages(self, doc: dict) -> list[dict[str, str]] | None:
        """The document as chat turns (used with ``--apply_chat_template``), or None for a raw completion prompt
        that is never chat-formatted. Tasks that do not override it keep lm-eval's own prompt construction."""
        raise NotImplementedError

    # ------------------------------------------------------------------ lm-eval's public API
    def process_results(self, doc: dict, results: list) -> dict[str, Any]:
        record = self.score_document(doc, responses_per_request(self, doc, results, self._takes_first))
        # lm-eval 0.5 takes a list as one value per repeat: the record is the document's one value
        return {m: [record] if LM_EVAL_05 else record for m in self.metric_names()}

    def aggregation(self) -> dict[str, Callable[[list], float]]:
        return {m: functools.partial(self._aggregate, m) for m in self.metric_names()}

    def aggregate(self, bootstrap_iters: int | None = 100000) -> Any:
        """lm-eval 0.5's aggregation step (0.4.13 has none): standard errors for lm-eval's ``mean`` only, as on
        0.4.13, which bootstraps only the aggregations it knows; 0.5 would bootstrap every corpus-level metric of
        ours (each resampling a whole ``compute_metrics``), so they get none ("N/A") as on 0.4.13."""
        plain_means = all(fn is mean for fn in self.aggregation().values())
        return super().aggregate(bootstrap_iters=bootstrap_iters if plain_means else 0)

    def higher_is_better(self) -> dict[str, bool]:
        lower = self.lower_is_better()
        return {m: m not in lower for m in self.metric_names()}

    def fewshot_context(self, doc: dict, num_fewshot: int, system_instruction: str | None = None,
                        apply_chat_template: bool = False, fewshot_as_multiturn: bool = False,
                        chat_template: Any = None, gen_prefix: str | None = None) -> str:
        """The prompt: :meth:`doc_to_text` (after a system instruction, if given), or with
        ``--apply_chat_template`` :meth:`chat_messages` through the model's chat template."""
        try:
            messages = self.chat_messages(doc)
        except NotImplementedError:
            return super().fewshot_context(doc, num_fewshot, system_instruction, apply_chat_template,
                                           fewshot_as_multiturn, chat_template, gen_prefix)
        if messages is None:
            return self.doc_to_text(doc)
        if not apply_chat_template or chat_template is None:
            prompt = self.doc_to_text(doc)
            return f"{system_instruction}\n\n{prompt}" if system_instruction else prompt
        system = [{"role": "system", "content": system_instruction}] if system_instruction else []
        return chat_template(system + messages, add_generation_prompt=True)

    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Our tasks build their documents with a ``custom_dataset`` function fed by the metadata; call it directly,
        without lm-eval's generic "Custom kwargs can be passed to --metadata" warning (our options are checked
        and documented, and an unknown key is an error). Says that it loads them (:mod:`harness_ext.startup`)."""
        say("%s: loading its documents", self.config.task)
        if callable(self.config.custom_dataset):
            self.dataset = self.config.custom_dataset(**(self.config.metadata or {}), **(self.config.dataset_kwargs or {}))
        else:
            super().download(dataset_kwargs, **kwargs)

    def build_all_requests(self, **kwargs: Any) -> None:
        """lm-eval's, remembering how many processes share the documents (the order the records come back in)."""
        self._world_size = int(kwargs.get("world_size") or 1)
        super().build_all_requests(**kwargs)

    def apply_filters(self) -> Any:
        """lm-eval's, on each request's own responses (not the answers to the padding requests of a launch)."""
        drop_padding_responses(self.instances)
        return super().apply_filters()

    def dump_config(self) -> dict:
        config = super().dump_config()
        record = self.results_record()
        if record is not None:
            config[self.RESULTS_KEY] = record
        if self.run_warnings:
            config[self.WARNINGS_KEY] = list(self.run_warnings)
        config["provenance"] = self.provenance()
        return config

    # ------------------------------------------------------------------ internals
    def _aggregate(self, metric: str, records: list) -> float:
        """lm-eval aggregates each metric on its own list, but all lists hold the same records: compute once."""
        key = id(records[0]) ^ len(records) if records else 0
        if self._computed is None or self._computed[0] != key:
            self._computed = (key, self.compute_metrics(in_document_order(records, self._world_size)))
        return self._computed[1][metric]


@functools.cache
def _with_base(cls: type, base: type) -> type:
    """``cls`` with lm-eval 0.5's ``base`` (its class for the task's output type) after it in the method order."""
    return type(cls.__name__, (cls, base), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
