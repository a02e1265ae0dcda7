"""RWKU's training corpora for ``unlearn run --data rwku``: the targets, the forget records of the corpus the
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

from pathlib import Path

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
