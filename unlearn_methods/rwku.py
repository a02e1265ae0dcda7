"""RWKU's data source for ``unlearn run --data rwku`` (:class:`Rwku`, its options and its training corpora): the
targets, the forget records of the corpus the
method's loss takes, and the retain records.

The release ships, per model (``llama3``, ``phi3``), three corpora written by that model about each target:
``train_positive_*`` (biographies: texts to push away, GA / NPO), ``train_pair_*`` (a biography prompt with a
fabricated biography preferred over the true one, DPO) and ``train_refusal_*`` (questions about the target with
refusals, rejection tuning). A method's :attr:`~unlearn_methods.base.UnlearnMethod.forget_corpus` (``text``,
``pair``, ``refusal``) picks the corpus; ``--rwku-corpus generated`` writes it with the model itself
(:mod:`unlearn_methods.rwku_generation`).

The release trains without retain data (its zero-shot setting). The methods here with a retain term get the other
targets' one-line descriptions (``forget_target``'s ``intro``): as texts for ``text`` methods, as the answer to
:data:`RETAIN_PROMPT` otherwise (set the method's retain weight to 0, e.g. ``--param alpha=0``, to train as the
release does).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unlearn_methods.data_sources import DataSource, register
from unlearn_methods.params import option
from unlearn_tasks.dataset_loader import DataError
from unlearn_tasks.rwku.data import load_rows, select_targets
from unlearn_tasks.rwku.options import HUB_ID

#: the release's corpora (its models) and the model's own (``generated``)
RELEASE_CORPORA = ("llama3", "phi3")
GENERATED = "generated"
CORPORA = (*RELEASE_CORPORA, GENERATED)
#: forget kind -> the prefix of its RWKU config (``train_positive_llama3``, ...)
CONFIG_PREFIX = {"text": "train_positive", "pair": "train_pair", "refusal": "train_refusal"}
#: the question a retain description answers (the release's biography request)
RETAIN_PROMPT = "Please write a short biography of {}."


def corpus_config(kind: str, corpus: str) -> str:
    """The RWKU config of a forget kind and corpus: ``train_pair_llama3``, ``train_positive_generated``."""
    return f"{CONFIG_PREFIX[kind]}_{corpus}"


def requested_targets(names: list[str], targets_file: str | None) -> list[str]:
    """The targets of ``--target`` (each a name, a position or a range) and of ``--targets FILE`` (one a line;
    blank lines and ``#`` comments skipped)."""
    wanted = [n.strip() for n in names if n.strip()]
    if targets_file:
        try:
            lines = Path(targets_file).expanduser().read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise DataError(f"--targets {targets_file}: cannot read it ({e.strerror or e}).") from None
        from_file = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
        if not from_file:
            raise DataError(f"--targets {targets_file}: no target in it (one name a line).")
        wanted += from_file
    return wanted


def intros(data_dir: str | None) -> dict[str, str]:
    """Each target of the data's ``forget_target`` list with its one-line description (``intro``)."""
    rows = load_rows("forget_target", HUB_ID, data_dir)
    missing = [str(r["target"]) for r in rows if not str(r.get("intro") or "").strip()]
    if missing:
        raise DataError(f"RWKU forget_target: no 'intro' for {missing[:3]}; the retain data and the generated corpus "
                        "need each target's one-line description.")
    return {str(r["target"]).strip(): str(r["intro"]).strip() for r in rows}


def resolve_targets(names: list[str], targets_file: str | None, data_dir: str | None) -> list[str]:
    """The selected targets, checked against the data's own list (unknown names are named, with close matches)."""
    known = list(intros(data_dir))
    return select_targets(known, requested_targets(names, targets_file), option="--target")


def forget_records(kind: str, rows: list[dict]) -> list[dict]:
    """Training records of one corpus's rows: ``text`` -> ``{"text"}``; ``pair`` (``response`` = [chosen,
    rejected]) -> the prompt, the true biography to push away and the fabricated one preferred; ``refusal`` -> the
    question with its refusal (as the preferred answer; no answer is pushed away)."""
    if kind == "text":
        return [{"text": r["text"]} for r in rows]
    if kind == "pair":
        out = []
        for n, r in enumerate(rows, 1):
            response = r["response"]
            if not isinstance(response, list) or len(response) != 2:
                raise DataError(f"RWKU pair corpus: row {n} ({r['subject']}) needs 'response': [chosen, rejected], "
                                f"got {response!r}.")
            out.append({"question": r["prompt"], "answer": response[1], "preferred": response[0]})
        return out
    return [{"question": "\n".join(p for p in (r["instruction"], str(r.get("input") or "")) if p.strip()),
             "answer": r["output"], "preferred": r["output"]} for r in rows]


def retain_records(kind: str, descriptions: dict[str, str], targets: list[str]) -> list[dict]:
    """The other targets' descriptions: texts for ``text`` methods, answers to :data:`RETAIN_PROMPT` otherwise."""
    others = [(t, d) for t, d in descriptions.items() if t not in set(targets)]
    if not others:
        raise DataError("RWKU: every target of the data is selected, so no other target's description is left as "
                        "retain data; select fewer targets.")
    if kind == "text":
        return [{"text": d} for _, d in others]
    return [{"question": RETAIN_PROMPT.format(t), "answer": d} for t, d in others]


def release_forget_rows(kind: str, corpus: str, targets: list[str], data_dir: str | None) -> list[dict]:
    """The rows of the release's corpus for the targets, in the data's order; a target without rows is an error
    (the release wrote its corpora for its own targets and models)."""
    config = corpus_config(kind, corpus)
    rows = [r for r in load_rows(config, HUB_ID, data_dir) if str(r["subject"]).strip() in set(targets)]
    covered = {str(r["subject"]).strip() for r in rows}
    missing = [t for t in targets if t not in covered]
    if missing:
        raise DataError(f"RWKU {config}: no rows for {missing[:3]}; write a corpus with the model itself "
                        "(--rwku-corpus generated).")
    return rows


@register
class Rwku(DataSource):
    """RWKU (real people, knowledge from pre-training): the release's training corpus of the selected targets that
    the method's loss takes (its ``forget_corpus``: ``text`` -> ``train_positive_*``, ``pair`` -> ``train_pair_*``,
    ``refusal`` -> ``train_refusal_*``), or one the model writes (``--rwku-corpus generated``); retain: the other
    targets' descriptions (this module)."""

    name = "rwku"
    help = ("'rwku' (jinzhuoran/RWKU: --target NAME or --targets FILE; the release's corpus of --rwku-corpus, the one "
            "the method takes)")

    @dataclass
    class Options:
        rwku_target: list[str] = option([], "A target to unlearn, a name of the data's forget_target "
                                        "list or a 1-based position or range in it (1-10); repeatable.", flag="--target",
                                        repeat=True, resume=True, metavar="NAME")
        rwku_targets_file: str | None = option(None, "A file of targets to unlearn, one a line (as "
                                               "--target).", flag="--targets", resume=True, path=True, metavar="FILE")
        rwku_corpus: str = option("llama3", "The forget corpus, the release's (written by Llama-3-8B-"
                                  "Instruct or Phi-3-mini) or one the model writes about each target as the release did "
                                  "(saved in OUT/rwku_generated/ with its provenance).",
                                  choices=("llama3", "phi3", "generated"), resume=True)
        rwku_decoding: str = option("sample", "With --rwku-corpus generated: the release's sampling or greedy decoding.",
                                    choices=("sample", "greedy"), resume=True)
        rwku_max_new_tokens: int = option(512, "With --rwku-corpus generated: new tokens per biography.", gt=0,
                                          unit="tokens", resume=True)
        rwku_prefixes: str | None = option(None, "With --rwku-corpus generated: response prefixes, one biography each (a "
                                           "JSON array such as the release's generation/all_truncated_outputs.json, or "
                                           "one a line).", default_text="one empty prefix", resume=True, path=True,
                                           metavar="FILE")
        rwku_questions: int = option(300, "With --rwku-corpus generated: questions written per target for the refusal "
                                     "corpus (methods that learn refusals).", gt=0, unit="questions", resume=True)

    def dataset(self, data: str) -> str:
        return HUB_ID

    def check(self, cfg) -> None:
        if not (cfg.rwku_target or cfg.rwku_targets_file):
            raise ValueError("--data rwku needs the target(s) to unlearn: --target NAME (repeatable; a name of the "
                             "data's forget_target list, or a position or range such as 1-10) or --targets FILE.")

    def kind(self, cfg) -> str:
        """The forget kind the run's method takes (its declared ``forget_corpus``)."""
        from unlearn_methods import get_method

        return get_method(cfg.method).forget_corpus

    def raw_text(self, cfg) -> bool:
        return self.kind(cfg) == "text"

    def resolve_splits(self, cfg) -> None:
        resolve_targets(cfg.rwku_target, cfg.rwku_targets_file, cfg.data_dir)  # unknown names fail before the model loads
        if cfg.rwku_target:  # positions and ranges saved (and evaluated) as the names they select
            cfg.rwku_target = resolve_targets(cfg.rwku_target, None, cfg.data_dir)
        cfg.forget = corpus_config(self.kind(cfg), cfg.rwku_corpus)
        cfg.retain = cfg.retain or "forget_target_intro"

    def generated_folder(self, out: Path) -> Path:
        from unlearn_methods.rwku_generation import FOLDER

        return Path(out) / FOLDER

    def write_corpus(self, cfg, out: Path, data_dir: str | None, model, tokenizer) -> None:
        from unlearn_methods import rwku_generation
        from unlearn_methods.idk import load_idk_answers

        if cfg.rwku_corpus != GENERATED:
            return
        kind = self.kind(cfg)
        path = self.generated_folder(out) / f"{corpus_config(kind, cfg.rwku_corpus)}.json"
        if cfg.resume and path.is_file():
            return
        targets = resolve_targets(cfg.rwku_target, cfg.rwku_targets_file, data_dir)
        settings = rwku_generation.GenerationSettings(
            decoding=cfg.rwku_decoding, max_new_tokens=cfg.rwku_max_new_tokens,
            prefixes=rwku_generation.read_prefixes(cfg.rwku_prefixes), questions=cfg.rwku_questions,
            refusals=load_idk_answers(cfg.idk_file), batch_size=cfg.batch_size, seed=cfg.seed)
        rows = rwku_generation.generate_rows(kind, model, tokenizer, intros(data_dir), targets, settings)
        rwku_generation.save_corpus(path.parent, path.stem, rows,
                                    rwku_generation.provenance(cfg.model, kind, targets, settings))

    def load(self, cfg, data_dir: str | None) -> tuple[list[dict], list[dict]]:
        from unlearn_tasks.dataset_loader import read_json_records

        kind = self.kind(cfg)
        targets = resolve_targets(cfg.rwku_target, cfg.rwku_targets_file, data_dir)
        if cfg.rwku_corpus == GENERATED:
            from unlearn_methods.checkpoint_folder import partial_path

            # written by write_corpus into the folder the run trains in (OUT.partial until the checkpoint is complete)
            path = self.generated_folder(partial_path(Path(cfg.out).expanduser().resolve())) / f"{cfg.forget}.json"
            rows = read_json_records(path, text_array=False)
        else:
            rows = release_forget_rows(kind, cfg.rwku_corpus, targets, data_dir)
        return forget_records(kind, rows), retain_records(kind, intros(data_dir), targets)

    def training_set(self, run, tokenizer) -> Any:
        if self.kind(run.cfg) == "text":
            from unlearn_methods.forget_retain import TextForgetRetainDataset

            return TextForgetRetainDataset(run.forget, run.retain, tokenizer, seed=run.cfg.seed,
                                           max_length=run.cfg.max_length)
        return super().training_set(run, tokenizer)

    eval_args = "--tasks rwku --metadata '{rwku_metadata}'"

    def template_fields(self, cfg) -> dict[str, Any]:
        import json

        return {**super().template_fields(cfg), "rwku_metadata": json.dumps(self.eval_metadata(cfg))}

    def eval_metadata(self, cfg) -> dict[str, Any]:
        return {"rwku_targets": requested_targets(cfg.rwku_target, cfg.rwku_targets_file)}
