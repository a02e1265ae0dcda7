"""Side-by-side tables of several models' numbers (TOFU, MUSE, WMDP, any lm-eval task), as Markdown, plain text
and JSON."""

from __future__ import annotations

from pathlib import Path

from unlearn_app.reports.numbers import format_number

#: The benchmark whose rows a task of no benchmark with rows gets.
DEFAULT_BENCHMARK = "tofu"


def rows_for_task(task: str) -> list[tuple[str, str]]:
    """The ordered, labelled rows of a task's benchmark, as the benchmark declares them
    (:mod:`unlearn_tasks.benchmarks`); TOFU's for a task of no benchmark, or of one that declares no rows."""
    from unlearn_tasks.benchmarks import benchmark, benchmark_of_task

    found = benchmark_of_task(task)
    return list(found.rows if found is not None and found.rows else benchmark(DEFAULT_BENCHMARK).rows)


def markdown_table(models: dict[str, dict[str, float]], rows: list[tuple[str, str]] | None = None) -> str:
    """One column per model, one row per metric present in at least one model (``rows``: TOFU's by default)."""
    rows = rows_for_task(DEFAULT_BENCHMARK) if rows is None else rows
    names = list(models)
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for key, label in rows:
        if any(key in m for m in models.values()):
            lines.append(f"| {label} | " + " | ".join(format_number(models[n].get(key)) for n in names) + " |")
    return "\n".join(lines)


def generic_rows(models: dict[str, dict[str, float]], task: str) -> list[tuple[str, str]]:
    """Rows for any task: its benchmark's rows in order (:func:`rows_for_task`), then every other metric
    alphabetically."""
    rows = rows_for_task(task)
    known = {k for k, _ in rows}
    present = {k for m in models.values() for k in m}
    return [r for r in rows if r[0] in present] + [(k, k) for k in sorted(present - known)]


def unique_names(paths: list[str]) -> list[str]:
    """Column names from paths: the shortest trailing parts that tell them apart (``ckA/eval``, ``ckB/eval``)."""
    parts = [Path(p).resolve().parts for p in paths]
    for n in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-n:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    dup = sorted({p for p in paths if paths.count(p) > 1} or set(paths))
    raise ValueError(f"The same run is given more than once ({', '.join(dup)}).")


def collect_runs(paths: list[str], names: list[str] | None = None) -> list[tuple[str, Path]]:
    """``(column name, results file or open-unlearning folder)`` for every run read: each RUN path is a results file
    or a folder; a folder with several runs (lm-eval writes one sub-folder per model) gives one column per
    sub-folder, named ``<name>/<sub-folder>``, each its newest results file by lm-eval's file-name timestamp. An
    open-unlearning evaluation folder is a run too. Names are unique."""
    if names is not None:
        if len(names) != len(paths):
            raise ValueError(f"{len(names)} names for {len(paths)} runs.")
        if len(set(names)) != len(names):
            raise ValueError(f"--names must be unique, got {', '.join(names)}.")
    names = names or unique_names(paths)
    runs: list[tuple[str, Path]] = []
    for name, path in zip(names, paths):
        found = _run_sources(Path(path))
        if len(found) == 1:
            runs.append((name, found[0]))
        else:
            runs += [(f"{name}/{_part_name(Path(path), f)}", f) for f in found]
    seen = [n for n, _ in runs]
    if len(set(seen)) != len(seen):
        raise ValueError(f"Run names collide ({', '.join(seen)}); pass --names.")
    return runs


def _part_name(path: Path, found: Path) -> str:
    """The column name part of one of several runs found under ``path``: its folder below ``path``, or for a run at
    ``path`` itself its kind (``open-unlearning``, ``lm-eval``), since one folder may hold one of each."""
    folder = found if found.is_dir() else found.parent
    part = folder.relative_to(path).as_posix()
    if part != ".":
        return part
    return "open-unlearning" if found.is_dir() else "lm-eval"


def _run_sources(path: Path) -> list[Path]:
    """The runs under ``path``: lm-eval results files (the newest of each folder) and open-unlearning evaluation
    folders (``TOFU_EVAL.json`` / ``MUSE_EVAL.json`` and their summaries; see :mod:`unlearn_app.open_unlearning.reader`),
    both kinds where a folder holds both."""
    from harness_ext.results import newest_per_folder
    from unlearn_app.open_unlearning.reader import is_ou_folder, ou_folders_under

    if path.is_file() and is_ou_folder(path):
        return [path.parent]
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; give an lm-eval output folder, a results_*.json file or an "
                                "open-unlearning evaluation folder.")
    ou = ou_folders_under(path)
    try:
        files = newest_per_folder(path)
    except FileNotFoundError:
        if not ou:
            raise
        files = []
    return files + ou


def task_tables(runs: dict[str, dict[str, dict[str, float]]]
                ) -> list[tuple[str, dict[str, dict[str, float]], list[tuple[str, str]]]]:
    """The tables of a report, for Markdown and HTML alike: ``(task, {run: metrics}, rows)`` per task, tasks sorted,
    rows in the task's benchmark's declared order (:func:`generic_rows`). ``runs`` is ``{run: {task: {metric:
    value}}}``."""
    tables = []
    for task in sorted({t for r in runs.values() for t in r}):
        models = {name: r.get(task, {}) for name, r in runs.items()}
        rows = generic_rows(models, task)
        shown = beside_rows(runs, task)
        for key, _, values in shown:
            models = {name: {key: values[name], **m} if name in values else m for name, m in models.items()}
        tables.append((task, models, [(key, label) for key, label, _ in shown] + rows))
    return tables


def beside_rows(runs: dict[str, dict[str, dict[str, float]]], task: str) -> list[tuple[str, str, dict[str, float]]]:
    """The other tasks' metrics that ``task``'s benchmark shows beside it (its ``beside`` declaration: Leak@k beside
    the greedy forget ROUGE), as ``(row key, label, {run: value})`` for the runs that hold one; the first other
    task found in a run wins."""
    from unlearn_tasks.benchmarks import benchmark_of_task

    found = benchmark_of_task(task)
    pairs = [(other, metric, label) for t, other, metric, label in (found.beside if found else ()) if t == task]
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for name, run in runs.items():
        if task not in run:
            continue
        for other, metric, label in pairs:
            if metric in run.get(other, {}):
                rows.setdefault((label, metric), {})[name] = run[other][metric]
                break
    return [(f"{metric} (beside)", label, values) for (label, metric), values in rows.items()]


def compare_runs(runs: dict[str, dict[str, dict[str, float]]]) -> str:
    """Markdown: one table per task, one column per run (``{run: {task: {metric: value}}}``)."""
    return "\n".join(f"## {task}\n\n{markdown_table(models, rows)}\n" for task, models, rows in task_tables(runs))


# --------------------------------------------------------------------------- TOFU data-transformation formats (ReLU)
def relu_metrics(per_task: dict[str, dict[str, float]]) -> dict[str, float]:
    """The ReLU forget + retain tasks' numbers of one model, keyed ``"<task>/<metric>"`` for :func:`relu_table`.

    ``per_task`` is :func:`harness_ext.results.task_metrics` of an lm-eval run (or ``load_results(DIR)``).
    """
    from unlearn_tasks.tofu_formats.formats import FORMATS, pair_tasks

    names = {t for f in FORMATS.values() for t in pair_tasks(f)}
    return {f"{task}/{m}": v for task, metrics in per_task.items() if task in names for m, v in metrics.items()}


def relu_rows() -> list[tuple[str, str, str]]:
    """(key, format label, score label) of every row :func:`relu_table` can show, in the paper's order."""
    from unlearn_tasks.tofu_formats.formats import FORMATS, GAP, METRIC_LABELS, option_counts, task_name

    rows = []
    for fmt in FORMATS.values():
        for n in option_counts(fmt):
            task = task_name(fmt, n)
            label = f"{fmt.label} ({n} options)" if n else fmt.label
            metric = METRIC_LABELS[fmt.metric]
            rows += [(f"{task}/forget_{fmt.metric}", label, f"forget {metric}"),
                     (f"{task}/retain_{fmt.metric}", "", f"retain {metric}"),
                     (f"{task}/{GAP}", "", "gap (forget - retain)")]
    return rows


def relu_table(models: dict[str, dict[str, float]]) -> str:
    """Per-format forget, retain and gap rows, one column per model (Markdown).

    ``models`` maps a model name to its numbers keyed ``"<task>/<metric>"`` (see :func:`relu_metrics`), e.g.
    ``{"target": {"tofu_mcqa/forget_acc": 0.66, ...}, "npo": {...}}``; other keys are ignored, so a dict that
    also holds TOFU metrics works. Formats no model has are left out.
    """
    names = list(models)
    lines = ["| format | score | " + " | ".join(names) + " |", "|---|---|" + "---:|" * len(names)]
    rows = relu_rows()
    for i in range(0, len(rows), 3):
        block = rows[i : i + 3]
        if any(key in m for key, _, _ in block for m in models.values()):
            for key, fmt_label, score in block:
                lines.append(f"| {fmt_label} | {score} | " + " | ".join(format_number(models[n].get(key)) for n in names) + " |")
    return "\n".join(lines)
