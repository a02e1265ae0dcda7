"""The generations a judge reads: question, ground-truth answer and the model's greedy answer of every item of a
benchmark's generated sets (:mod:`.benchmarks`: TOFU's forget, retain, real authors, world facts; MLLMU-Bench's
forget, test, retain, celebrity generation questions), from

* lm-eval's samples files (``lm_eval --log_samples``: ``samples_<task>_<date>.jsonl`` of ``tofu_forgetNN`` or
  ``tofu_forgetNN_rouge``; each line's ``doc`` holds ``split``, ``index``, ``question``, ``answer``, and its
  ``filtered_resps`` the generation first; MLLMU-Bench: ``samples_mllmu_forgetNN_image_<date>.jsonl``; lm-eval 0.5
  names a task run through its group ``samples_<group>::<task>_<date>.jsonl``, e.g. ``samples_tofu::tofu_forget10_...``
  of ``--tasks tofu``), given as a file, an lm-eval output folder or its results file;
* an ``unlearn run`` folder (its evaluation, ``eval/``, is such an lm-eval output folder);
* an open-unlearning evaluation folder (TOFU only; ``TOFU_EVAL.json``: ``<set>_Q_A_ROUGE.value_by_index`` holds per item
  ``input``, ``ground_truth`` and ``generation``; ``input`` is the prompt as open-unlearning decoded it).

The files are untrusted: no symbolic link is followed, and anything unreadable is a one-line
:class:`JudgeInputError` naming the file."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unlearn_app.judge.benchmarks import BENCHMARKS, JudgedBenchmark

SETS = BENCHMARKS["tofu"].sets
TOFU = BENCHMARKS["tofu"]
#: open-unlearning's key of each set's generations in TOFU_EVAL.json.
OU_KEYS = {"forget": "forget_Q_A_ROUGE", "retain": "retain_Q_A_ROUGE", "ra": "ra_Q_A_ROUGE", "wf": "wf_Q_A_ROUGE"}
#: An open-unlearning ``value_by_index`` key: the item's index in ASCII digits, without leading zeros, at most 9.
_OU_INDEX = re.compile(r"0|[1-9][0-9]{0,8}")


class JudgeInputError(ValueError):
    """Generations that cannot be read; the one-line message names the file and what to give instead."""


@dataclass(frozen=True)
class Item:
    """One generated answer to judge."""

    split: str
    index: int | str  # TOFU: the item's index in its set; MLLMU-Bench: the document's id
    question: str
    ground_truth: str
    answer: str


@dataclass
class Generations:
    kind: str  # "lm-eval" or "open-unlearning"
    items: dict[str, list[Item]] = field(default_factory=dict)  # source task -> items
    files: list[Path] = field(default_factory=list)  # what was read


def _no_link(path: Path, root: Path) -> Path:
    """``path`` when neither it nor a folder between it and ``root`` (the RUN given) is a symbolic link."""
    for p in (path, *path.parents):
        if p.is_symlink():
            raise JudgeInputError(f"{p} is a symbolic link; give the real path (links are not followed)")
        if p == root:
            break
    return path


def read_generations(run: str | Path, bench: JudgedBenchmark = TOFU) -> Generations:
    """The generations of ``bench`` in ``run`` (see the module docstring)."""
    from harness_ext.results import samples_file_task
    from unlearn_app.open_unlearning.reader import is_ou_folder
    from unlearn_methods.checkpoint_folder import CONFIG_FILE

    root = Path(run).expanduser().absolute()
    path = _no_link(root, root)
    if not path.exists():
        raise JudgeInputError(f"{run} does not exist; give lm-eval's samples file or output folder (--log_samples), "
                              "an `unlearn run` folder or an open-unlearning evaluation folder.")
    if path.is_file() and samples_file_task(path.name):
        return _from_samples([path], bench)
    if is_ou_folder(path):
        if bench is not TOFU:
            raise JudgeInputError(f"{run} is an open-unlearning evaluation (TOFU); give {bench.hint}")
        return _from_ou(path if path.is_dir() else path.parent, root)
    if path.is_dir() and (path / CONFIG_FILE).is_file():
        if not (path / "eval").is_dir():
            task = "tofu_forgetNN" if bench is TOFU else "mllmu_forgetNN"
            raise JudgeInputError(f"{run} is an `unlearn run` folder without an evaluation (eval/); run it with "
                                  f"--eval-tasks {task}, or give the lm-eval output folder of its evaluation.")
        path = _no_link(path / "eval", root)
    return _from_samples(_samples_of_run(path, root, bench), bench)


def _samples_of_run(path: Path, root: Path, bench: JudgedBenchmark) -> list[Path]:
    """The samples files of ``bench``'s tasks of the one run under ``path`` (its newest results file's)."""
    from harness_ext.results import (
        ResultsFileError,
        latest_results_file,
        plain_task_name,
        read_results_file,
        samples_files,
    )

    try:
        results = _no_link(latest_results_file(path), root)
        names = read_results_file(results).get("results") or {}
        tasks = [t for t in names if bench.is_source_task(plain_task_name(t))]  # a name 0.5 left qualified too
    except (FileNotFoundError, ResultsFileError) as e:
        raise JudgeInputError(str(e)) from None
    files = [f for t in tasks for f in samples_files(results, t)]
    if not files:
        raise JudgeInputError(f"{results}: no samples file of a {bench.label} task beside it; run lm_eval with "
                              f"--log_samples and give {bench.hint}.")
    return [_no_link(f, root) for f in files]


def _from_samples(files: list[Path], bench: JudgedBenchmark = TOFU) -> Generations:
    """The generations in lm-eval samples files, by task: the plain name of lm-eval 0.5's ``group::task`` unless two
    of the files hold that task (then the names as lm-eval wrote them)."""
    from harness_ext.results import plain_task_name, samples_file_task
    from unlearn_app.leaderboard.recompute import FILTER, SamplesError, parse_samples

    out = Generations("lm-eval")
    written = [samples_file_task(file.name)[0] for file in files]
    plain = [plain_task_name(task) for task in written]
    for file, task in zip(files, (p if plain.count(p) == 1 else w for w, p in zip(written, plain))):
        try:
            rows = parse_samples(file.read_bytes(), file.name)
        except SamplesError as e:
            raise JudgeInputError(str(e)) from None
        except OSError as e:
            raise JudgeInputError(f"cannot read {file}: {e.strerror}") from None
        items = []
        for row in rows:
            raw = bench.item_of_row(row) if str(row.get("filter", FILTER)) == FILTER else None
            if raw is not None:
                items.append(_item(*raw, f"{file.name} document {row['doc_id']}", bench))
        if items:
            out.items[task] = items
            out.files.append(file)
    if not out.items:
        raise JudgeInputError(f"{', '.join(f.name for f in files)}: no generated answer of the {', '.join(bench.sets)} "
                              f"sets ({bench.label}); give {bench.hint}.")
    return out


def _item(split: Any, index: Any, question: Any, truth: Any, answer: Any, where: str,
          bench: JudgedBenchmark = TOFU) -> Item:
    if not bench.valid_index(index) or not all(isinstance(x, str) for x in (question, truth, answer)):
        what = "an integer index" if bench is TOFU else "an id"
        raise JudgeInputError(f"{where}: needs {what} and the question, ground truth and generation as "
                              "text; give the file as the evaluation wrote it")
    for name, text in (("question", question), ("ground truth", truth), ("generation", answer)):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise JudgeInputError(f"{where}: its {name} is no text: it holds a lone surrogate ({text[e.start]!r} at "
                                  f"character {e.start}); give the file as the evaluation wrote it") from None
    return Item(split, index, question, truth, answer)


def _from_ou(folder: Path, root: Path) -> Generations:
    from harness_ext.results import ResultsFileError
    from unlearn_app.open_unlearning.reader import read_json, task_name

    eval_file = _no_link(folder / "TOFU_EVAL.json", root)
    if not eval_file.is_file():
        raise JudgeInputError(f"{folder}: no TOFU_EVAL.json (open-unlearning's per-item log) to read generations from")
    try:
        logs = read_json(eval_file)
    except ResultsFileError as e:
        raise JudgeInputError(str(e)) from None
    if not isinstance(logs, dict):
        raise JudgeInputError(f"{eval_file}: not an open-unlearning evaluation log (a JSON object)")
    items = []
    for split, key in OU_KEYS.items():
        entry = logs.get(key)
        by_index = entry.get("value_by_index") if isinstance(entry, dict) else None
        if not isinstance(by_index, dict):
            continue
        for idx, value in sorted(by_index.items(), key=lambda kv: (len(kv[0]), kv[0])):
            shown = idx if len(idx) <= 40 else f"{idx[:20]}... ({len(idx)} characters)"
            where = f"{eval_file.name} {key}.value_by_index[{shown!r}]"
            if not isinstance(value, dict) or not _OU_INDEX.fullmatch(idx):
                raise JudgeInputError(f"{where}: not an item (an object under an index of at most 9 ASCII digits, "
                                      "as open-unlearning writes it)")
            items.append(_item(split, int(idx), value.get("input"), value.get("ground_truth"), value.get("generation"),
                               where))
    if not items:
        raise JudgeInputError(f"{eval_file}: no per-item generations ({', '.join(OU_KEYS.values())} value_by_index "
                              "with input, ground_truth and generation)")
    return Generations("open-unlearning", {task_name("TOFU", logs, folder): items}, [eval_file])
