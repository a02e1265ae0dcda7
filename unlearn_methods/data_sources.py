"""Where ``unlearn run --data NAME`` gets its forget / retain data, one class per source: its ``--data`` names,
dataset id, split names, how it loads the records and turns them into training examples and batches.

A source is registered with :func:`register` (RWKU's lives beside its training code, :mod:`unlearn_methods.rwku`,
and registers when :mod:`unlearn_methods.config` imports it); :func:`data_source` finds the one for a ``--data`` value (the TOFU
source, last, takes any other value as a Hub id in TOFU's schema). Importing this module is light (the
:mod:`unlearn_methods.config` and ``unlearn --help`` read it); torch and the datasets load inside the methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from unlearn_methods.params import option
from unlearn_tasks.muse.corpora import DEFAULT_RETAIN as MUSE_DEFAULT_RETAIN
from unlearn_tasks.muse.corpora import HUB_IDS as MUSE_HUB_IDS
from unlearn_tasks.muse.corpora import corpus_of
from unlearn_tasks.tofu.splits import HUB_ID as TOFU_HUB_ID
from unlearn_tasks.tofu.splits import retain_split


@dataclass
class NoOptions:
    """A data source without options of its own."""


class DataSource:
    """Base of the data sources: question-answer pairs in TOFU's schema (see :class:`Tofu`). A subclass sets
    ``name`` and ``help`` (its part of the ``--data`` help), its own options (``Options``), and overrides what
    differs."""

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    #: The source's own `unlearn run` options, declared as a dataclass of :func:`unlearn_methods.params.option`
    #: fields, as a method declares its ``Params``: their flags, ``--config`` keys, saved keys, checks and ``--help``
    #: come from here (:func:`unlearn_methods.config.run_fields`); the run reads them as ``cfg.NAME`` (or
    #: ``cfg.options``). Another source's option given a value is refused.
    Options: ClassVar[type] = NoOptions
    #: Raw text, no questions: methods that need questions (``qa_only``) do not apply.
    text: ClassVar[bool] = False
    #: Image and text rows for a vision-language model (with its processor, evaluated with hf-multimodal).
    vision: ClassVar[bool] = False
    #: How a checkpoint trained on this source is evaluated: lm-eval's model type, and the ``--tasks`` (and any
    #: ``--metadata``) arguments, a template formatted with :meth:`template_fields` (the run config's fields). The
    #: model card's "How to evaluate" line and ``--eval-tasks``' backend come from these.
    eval_model: ClassVar[str] = "hf"
    eval_args: ClassVar[str] = "--tasks tofu_{forget}"

    def matches(self, data: str) -> bool:
        return data == self.name

    def raw_text(self, cfg) -> bool:
        """Whether the run ``cfg`` trains on raw text (no questions, so the prompt format does not apply)."""
        return self.text

    def template_fields(self, cfg) -> dict[str, Any]:
        """The values :attr:`eval_args` is formatted with: the run config's fields (splits resolved)."""
        return cfg.to_dict()

    def evaluation(self, cfg) -> str:
        """:attr:`eval_args` for the run ``cfg`` (e.g. ``--tasks tofu_forget10``)."""
        return self.eval_args.format(**self.template_fields(cfg))

    def dataset(self, data: str) -> str:
        """The dataset id the records come from (a Hub id), recorded in the model card."""
        return data

    def resolve_splits(self, cfg) -> None:
        """Fill in ``cfg.forget`` / ``cfg.retain`` where they follow from the source (the retain split of a TOFU
        forget split by default)."""
        cfg.retain = cfg.retain or retain_split(cfg.forget)

    def check(self, cfg) -> None:
        """Raise ValueError when the run's options do not give the source what it needs (called by
        :meth:`unlearn_methods.config.RunConfig.validate`)."""

    def local_data(self, cfg, out: Path) -> str | None:
        """The local folder the run (and its evaluation) reads, if any."""
        return cfg.data_dir

    def write_corpus(self, cfg, out: Path, data_dir: str | None, model, tokenizer) -> None:
        """Write the forget data with the loaded model before :meth:`load` reads it, for sources that have the
        model write it (RWKU's generated corpus); nothing by default."""

    def eval_metadata(self, cfg) -> dict[str, Any]:
        """Task options the run's evaluations get from the source (under ``--eval-metadata``, which wins)."""
        return {}

    def load(self, cfg, data_dir: str | None) -> tuple[list[dict], list[dict]]:
        """The forget and the retain records."""
        from unlearn_methods.forget_retain import load_qa

        dataset = self.dataset(cfg.data)
        return load_qa(cfg.forget, dataset, data_dir), load_qa(cfg.retain, dataset, data_dir)

    def training_set(self, run, tokenizer) -> Any:
        """The training examples (a torch Dataset) of the run's forget / retain records, in the run's prompt
        format (:mod:`unlearn_methods.prompt_format`)."""
        from unlearn_methods.forget_retain import ForgetRetainDataset
        from unlearn_methods.idk import load_idk_answers
        from unlearn_methods.prompt_format import prompt_format_of

        cfg = run.cfg
        return ForgetRetainDataset(run.forget, run.retain, tokenizer, load_idk_answers(cfg.idk_file), seed=cfg.seed,
                                   max_length=cfg.max_length, alternates=run.alternates,
                                   prompt=prompt_format_of(cfg))

    def collator(self, tokenizer, prompt: Any = None) -> Any:
        """The batches' collator; ``prompt``: the run's :class:`~unlearn_methods.prompt_format.PromptFormat` (its
        ``ou_chat_mask`` selects open-unlearning's attention mask)."""
        from unlearn_methods.forget_retain import PairCollator

        return PairCollator(tokenizer.pad_token_id, bool(prompt is not None and prompt.ou_chat_mask))


#: Registered sources, in the order :func:`data_source` tries them (the TOFU-schema source last).
SOURCES: list[DataSource] = []


def register(cls: type[DataSource]) -> type[DataSource]:
    """Class decorator: make ``cls`` a ``--data`` source (tried before those registered earlier)."""
    SOURCES.insert(0, cls())
    return cls


def data_source(data: str) -> DataSource:
    """The source of a ``--data`` value."""
    return next(s for s in SOURCES if s.matches(data))


def data_help() -> str:
    """The ``--data`` help: each source's part, TOFU's first."""
    return "; ".join(s.help for s in reversed(SOURCES)) + "."


@register
class Tofu(DataSource):
    """TOFU's question-answer pairs from the Hub, the embedded demo corpus, or any Hub id / folder in its schema."""

    name = "tofu"
    help = "'tofu' (locuslab/TOFU), 'demo' (embedded corpus) or a Hub id in TOFU's schema"

    def matches(self, data: str) -> bool:
        return True

    def dataset(self, data: str) -> str:
        return TOFU_HUB_ID if data == "tofu" else data

    def check(self, cfg) -> None:
        from unlearn_tasks.dataset_loader import can_name_dataset

        if not can_name_dataset(cfg.data):  # refused before any model loads, not by the Hub after it
            raise ValueError(f"--data {cfg.data!r} is neither a data source's name (tofu, demo, muse_news, ...: see "
                             "--data in `unlearn run --help`) nor a Hub dataset id in TOFU's schema (ORG/NAME).")

    def local_data(self, cfg, out: Path) -> str | None:
        if cfg.data == "demo" and not cfg.data_dir:
            from unlearn_methods.scaffolding.tofu_corpus import write_corpus

            return str(write_corpus(out / "demo_data"))
        return cfg.data_dir


@register
class EvalDU(DataSource):
    """Eval-DU (deep unlearning): forget one relationship fact (or a minimal deep-unlearning set of it), retain
    every other fact, as question-answer pairs."""

    name = "evaldu"
    help = "'evaldu' (--data-dir = an Eval-DU JSON folder, --evaldu-target the fact)"

    @dataclass
    class Options:
        evaldu_target: int | None = option(None, "The relationship fact id to unlearn (e.g. 272).",
                                           resume=True)
        evaldu_minimal_set: bool = option(False, "Unlearn a whole minimal deep-unlearning set of the "
                                          "target (white-box).", flag="--minimal-set", resume=True)

    def check(self, cfg) -> None:
        if cfg.evaldu_target is None or not cfg.data_dir:
            raise ValueError("--data evaldu needs --data-dir (an Eval-DU JSON folder) and --evaldu-target FACT_ID.")
    eval_args = """--tasks evaldu --metadata '{{"data_dir": "EVALDU_DIR", "target": {evaldu_target}}}'"""

    def resolve_splits(self, cfg) -> None:
        cfg.forget = f"evaldu_fact_{cfg.evaldu_target}" + ("_minimal_set" if cfg.evaldu_minimal_set else "")
        cfg.retain = cfg.retain or "evaldu_other_facts"

    def load(self, cfg, data_dir: str | None) -> tuple[list[dict], list[dict]]:
        from unlearn_methods.forget_retain import evaldu_forget_retain

        return evaldu_forget_retain(data_dir, cfg.evaldu_target, cfg.evaldu_minimal_set)


@register
class Muse(DataSource):
    """MUSE's raw text corpora (News, Books): chunks of text, no questions."""

    name = "muse"
    help = ("'muse_news' / 'muse_books' (MUSE's raw text: --forget forget, retain default retain1; methods limited "
            "to questions in `unlearn methods` do not apply)")
    text = True
    eval_args = "--tasks muse_{corpus}"

    def matches(self, data: str) -> bool:
        return corpus_of(data) is not None

    def template_fields(self, cfg) -> dict[str, Any]:
        return {**super().template_fields(cfg), "corpus": corpus_of(cfg.data)}

    def dataset(self, data: str) -> str:
        return MUSE_HUB_IDS[corpus_of(data)]

    def resolve_splits(self, cfg) -> None:
        cfg.retain = cfg.retain or MUSE_DEFAULT_RETAIN

    def load(self, cfg, data_dir: str | None) -> tuple[list[dict], list[dict]]:
        from unlearn_methods.forget_retain import load_texts

        dataset = self.dataset(cfg.data)
        return load_texts(cfg.forget, dataset, data_dir), load_texts(cfg.retain, dataset, data_dir)

    def training_set(self, run, tokenizer) -> Any:
        from unlearn_methods.forget_retain import TextForgetRetainDataset

        return TextForgetRetainDataset(run.forget, run.retain, tokenizer, seed=run.cfg.seed,
                                       max_length=run.cfg.max_length)


@register
class Clear(DataSource):
    """CLEAR: synthetic people's text facts and face-caption pairs, for a LLaVA-style vision-language model."""

    name = "clear"
    help = "'clear' (therem/CLEAR, text and images: --model is a LLaVA-style vision-language model)"
    vision = True
    eval_model = "hf-multimodal"
    eval_args = "--tasks clear_{forget}"

    @dataclass
    class Options:
        modality: str = option("both", "With --data clear or mllmu: unlearn from the people's text rows, their "
                               "image rows, or both.", choices=("text", "image", "both"))

    def dataset(self, data: str) -> str:
        from unlearn_tasks.clear.splits import HUB_ID

        return HUB_ID

    def load(self, cfg, data_dir: str | None) -> tuple[list[dict], list[dict]]:
        from unlearn_methods.vlm import clear_records

        dataset = self.dataset(cfg.data)
        return (clear_records(cfg.forget, cfg.modality, data_dir, dataset, cfg.seed),
                clear_records(cfg.retain, cfg.modality, data_dir, dataset, cfg.seed))

    def training_set(self, run, tokenizer) -> Any:
        from unlearn_methods.idk import load_idk_answers
        from unlearn_methods.vlm import VisionForgetRetainDataset

        cfg = run.cfg
        return VisionForgetRetainDataset(run.forget, run.retain, tokenizer, load_idk_answers(cfg.idk_file),
                                         seed=cfg.seed, max_length=cfg.max_length, alternates=run.alternates)

    def collator(self, tokenizer, prompt: Any = None) -> Any:
        from unlearn_methods.vlm import VisionPairCollator

        return VisionPairCollator(tokenizer.tokenizer.pad_token_id)


@register
class Mllmu(Clear):
    """MLLMU-Bench: fictitious people's photo question-answer pairs and text facts, for a vision-language model."""

    name = "mllmu"
    help = ("'mllmu' (MLLMMU/MLLMU-Bench, photos and text: --forget forget05 / forget10 / forget15, retain the other "
            "profiles; --model is a LLaVA-style vision-language model)")
    eval_args = "--tasks mllmu_{forget}"

    def dataset(self, data: str) -> str:  # its options are CLEAR's (--modality)
        from unlearn_tasks.mllmu.splits import HUB_ID

        return HUB_ID

    def check(self, cfg) -> None:
        from unlearn_tasks.mllmu.splits import FORGET_SPLITS

        if cfg.forget not in FORGET_SPLITS:
            raise ValueError(f"--data mllmu needs --forget {' / '.join(FORGET_SPLITS)} (the forget percentage), "
                             f"not {cfg.forget!r}.")

    def resolve_splits(self, cfg) -> None:
        from unlearn_tasks.mllmu.splits import FORGET_PERCENTS, retain_config

        if cfg.forget in FORGET_PERCENTS:
            cfg.retain = cfg.retain or retain_config(cfg.forget)

    def load(self, cfg, data_dir: str | None) -> tuple[list[dict], list[dict]]:
        from unlearn_methods.vlm import mllmu_records

        dataset = self.dataset(cfg.data)
        return (mllmu_records(cfg.forget, cfg.modality, data_dir, dataset),
                mllmu_records(cfg.retain, cfg.modality, data_dir, dataset))
