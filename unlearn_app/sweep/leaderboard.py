"""Where a sweep ends: ``DIR/leaderboard.md``, ``.json``, ``.html`` (the HTML report of :mod:`unlearn_app.reports.html_page`
with the sweep's sections on top) and ``.png`` (forget vs utility, every trial a point, the Pareto front drawn).

One row per method at its selected setting: the setting whose mean ``select`` score over seeds is best among those
whose mean metrics pass ``select_if`` (without ``select``: one row per setting). Every number is a mean (and sample
standard deviation) over the seeds of the trials' own lm-eval results files, which the provenance lists with their
SHA-256."""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness_ext import provenance
from harness_ext.results import json_safe
from unlearn_app.ci.checks import MissingValue, evaluate, lookup_in
from unlearn_app.reports.numbers import MISSING, format_number
from unlearn_app.selection import Selection
from unlearn_app.sweep.engine import TRIALS_FILE, SweepError, check_folder, hold, read_records
from unlearn_app.sweep.spec import Spec

if TYPE_CHECKING:
    from markupsafe import Markup

RECOVERY = "relearn recovery"  # held-out forget probability after relearning minus before
KLOM = "KLoM p95"  # of the split klom.split, the setting's seeds against the oracles
ULIRA = "U-LiRA accuracy"


def attack_columns(board: dict[str, Any]) -> list[str]:
    """The leaderboard's columns after the axes: the forget measure after each attack, the relearning recovery,
    KLoM and U-LiRA."""
    klom = board.get("klom") or {}
    return ([f"forget after {a}" for a in board["attacks"]] + ([RECOVERY] if "relearn" in board["attacks"] else [])
            + ([KLOM] if klom else []) + ([ULIRA] if klom.get("ulira") else []))


def place_columns(board: dict[str, Any]) -> list[str]:
    """``stage`` (a sequential sweep) and ``forget split`` (several of them): where a row sits in the sweep."""
    trials = board["trials"]
    return (["stage"] if any(r.get("stage") for r in trials) else []) + (
        ["forget split"] if len({r.get("forget") for r in trials}) > 1 else [])


def _place(columns: list[str], row: dict[str, Any]) -> list[str]:
    """The cells of :func:`place_columns` for a leaderboard row or a trial record."""
    return [str(row.get("stage") or "") if c == "stage" else str(row.get("forget_split") or row.get("forget"))
            for c in columns]


def _score(rule: Selection | None, metrics: dict[str, dict[str, float]]) -> float:
    if rule is None:
        return math.nan
    try:
        return float(rule.score(metrics))
    except (LookupError, TypeError, ValueError):
        return math.nan


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _spread(values: list[float | None], seeds: list[int] | None = None) -> dict[str, Any]:
    """Mean, sample sd and ``n`` of the finite ``values`` (one per seed); ``missing_seeds``: the seeds whose value
    is missing, NaN or infinite (the mean is over the others, and says so). One value has no sd (None)."""
    finite = [v for v in values if _finite(v)]
    out = {"mean": statistics.fmean(finite) if finite else None,
           "sd": statistics.stdev(finite) if len(finite) > 1 else None, "n": len(finite)}
    if seeds is not None and len(finite) < len(values):
        out["missing_seeds"] = [s for s, v in zip(seeds, values) if not _finite(v)]
    return out


def _mean_metrics(records: list[dict[str, Any]]) -> tuple[dict, dict, dict]:
    """Mean and sd over ``records`` of every metric, and ``{task: {metric: seeds without a value}}``."""
    means: dict[str, dict[str, float]] = {}
    sds: dict[str, dict[str, float]] = {}
    missing: dict[str, dict[str, list[int]]] = {}
    seeds = [r["seed"] for r in records]
    for task in dict.fromkeys(t for r in records for t in r.get("metrics") or {}):
        for metric in dict.fromkeys(m for r in records for m in (r.get("metrics") or {}).get(task, {})):
            s = _spread([(r.get("metrics") or {}).get(task, {}).get(metric) for r in records], seeds)
            means.setdefault(task, {})[metric] = math.nan if s["mean"] is None else s["mean"]
            sds.setdefault(task, {})[metric] = math.nan if s["sd"] is None else s["sd"]
            if s.get("missing_seeds"):
                missing.setdefault(task, {})[metric] = s["missing_seeds"]
    return means, sds, missing


def recheck(spec: Spec, records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The records with ``checks`` and ``passed`` evaluated again from their metrics by the checks of ``spec``
    (the current spec: a ``--resume`` after the checks changed shows the current verdicts, not the old ones)."""
    from unlearn_app.sweep.trial import check_results

    texts = [c.text for c in spec.evaluation.checks]
    out = {}
    for key, record in records.items():
        if record.get("status") == "ok":
            checks = check_results(texts, record.get("metrics") or {}, spec.evaluation.baseline)
            record = {**record, "checks": checks, "passed": all(c["passed"] for c in checks)}
        out[key] = record
    return out


def _better(mode: str, a: float, b: float) -> bool:
    return a > b if mode == "max" else a < b


def pareto_front(points: dict[str, tuple[float, float]], modes: tuple[str, str]) -> list[str]:
    """The points no other point dominates (at least as good on both axes, better on one); NaN points are out."""
    sign = [1 if m == "max" else -1 for m in modes]
    pts = {k: (sign[0] * x, sign[1] * y) for k, (x, y) in points.items() if math.isfinite(x) and math.isfinite(y)}
    return [k for k, (x, y) in pts.items()
            if not any(ox >= x and oy >= y and (ox > x or oy > y) for o, (ox, oy) in pts.items() if o != k)]


def summarize(spec: Spec, records: dict[str, dict[str, Any]], out: str | Path | None = None) -> dict[str, Any]:
    """The leaderboard as data (what ``leaderboard.json`` holds); ``out``: the sweep folder (results files are
    relative to it; needed for KLoM)."""
    records = recheck(spec, records)
    trials = [{**t.as_dict(), **records[t.id]} for t in spec.trials if t.id in records]  # the spec's fields kept
    oracles = {t.id for t in spec.trials if t.oracle}
    ok = [r for r in trials if r["status"] == "ok" and r["id"] not in oracles]
    baseline = None
    if spec.evaluation.baseline and spec.select and spec.select.conditions:
        from unlearn_app.ci.runner import load_baseline

        baseline = lookup_in(load_baseline(spec.evaluation.baseline), "the baseline")
    settings: dict[str, dict[str, Any]] = {}
    for trial in spec.trials:
        runs = [r for r in ok if r["setting"] == trial.setting]
        if trial.oracle:
            continue
        if trial.setting in settings or not runs:
            continue
        means, sds, missing = _mean_metrics(runs)
        seeds = [r["seed"] for r in runs]
        row = {"method": trial.method, "setting": trial.setting, "values": trial.values, "model": trial.model,
               "forget_split": trial.forget, "stage": trial.stage, "seeds": [r["seed"] for r in runs],
               "trials": [r["id"] for r in runs],
               "metrics": means, "metrics_sd": sds, **({"metrics_missing_seeds": missing} if missing else {}),
               "checks_passed": all(r.get("passed", True) for r in runs)}
        if spec.select:
            row["score"] = _spread([_score(spec.select, r["metrics"]) for r in runs], seeds)
            row["ineligible"] = _ineligible(spec.select, means, baseline)
        for axis, rule in spec.pareto.items():
            row[axis] = _spread([_score(rule, r["metrics"]) for r in runs], seeds)
        rule = spec.pareto.get("forget") or spec.select
        for name in spec.attacks:  # the forget measure after the attack, beside the one before
            row[f"forget after {name}"] = _spread([_score(rule, (r.get("attacks") or {}).get(name, {}).get("metrics", {}))
                                                   for r in runs], seeds)
        if "relearn" in spec.attacks:  # the held-out forget probability the relearning attack brought back
            row[RECOVERY] = _spread([(r.get("attacks") or {}).get("relearn", {}).get("recovery") for r in runs], seeds)
        if spec.klom:
            row.update(_ensembles(spec, [r for r in trials if r["id"] in oracles and r["status"] == "ok"
                                         and r["forget"] == trial.forget], runs, Path(out or ".")))
        settings[trial.setting] = row
    rows = list(settings.values())
    if spec.select:
        best: dict[tuple, dict[str, Any]] = {}
        for row in rows:
            key = (row["method"], row["model"], row["forget_split"], row["stage"])
            score = row["score"]["mean"]
            if row["ineligible"] or score is None:
                continue
            if key not in best or _better(spec.select.mode, score, best[key]["score"]["mean"]):
                best[key] = row
        rows = sorted(best.values(), key=lambda r: r["score"]["mean"], reverse=spec.select.mode == "max")
    points = {r["id"]: (_score(spec.pareto["utility"], r["metrics"]), _score(spec.pareto["forget"], r["metrics"]))
              for r in ok} if spec.pareto else {}
    front = pareto_front(points, (spec.pareto["utility"].mode, spec.pareto["forget"].mode)) if points else []
    root = Path(spec.path).parent
    return {
        "spec": spec.path, "spec_sha256": spec.sha256,
        "select": spec.select.text if spec.select else None,
        "select_if": [c.text for c in spec.select.conditions] if spec.select else [],
        "pareto": {axis: rule.text for axis, rule in spec.pareto.items()}, "attacks": spec.attacks,
        "klom": {k: v for k, v in spec.klom.items() if k != "oracle_run"} | (
            {"oracle_trials": sorted(oracles)} if spec.klom else {}),
        "leaderboard": rows, "settings": list(settings.values()),
        "trials": trials, "pareto_points": {k: list(v) for k, v in points.items()}, "pareto_front": front,
        "counts": {"trials": len(spec.trials), "finished": len(trials), "ok": sum(r["status"] == "ok" for r in trials),
                   "failed": sum(r["status"] == "failed" for r in trials),
                   **({"stopped": stopped} if (stopped := sum(r["status"] == "stopped" for r in trials)) else {})},
        "provenance": {"software": provenance.software(), "spec_folder": str(root)},
    }


def _ensembles(spec: Spec, oracles: list[dict[str, Any]], runs: list[dict[str, Any]], out_dir: Path) -> dict[str, Any]:
    """KLoM (and U-LiRA) of a setting's seeds against the oracle trials, read from their lm-eval results files as
    `unlearn klom` / `unlearn ulira` read them: ``klom`` (every split), ``ulira``, and the leaderboard columns."""
    from unlearn_tasks.margins.ensemble import load_ensemble
    from unlearn_tasks.metrics.klom import KlomInputError, klom
    from unlearn_tasks.metrics.ulira import ulira

    task, split = spec.klom["task"], spec.klom["split"]
    out: dict[str, Any] = {KLOM: None, **({ULIRA: None} if spec.klom["ulira"] else {})}
    if len(runs) < 2 or len(oracles) < 2:
        out["klom"] = {"error": f"{len(runs)} unlearned and {len(oracles)} oracle models finished; KLoM needs two "
                                "of each"}
        return out
    try:
        u = load_ensemble([out_dir / r["results_file"] for r in runs], task=task, name="unlearned")
        o = load_ensemble([out_dir / r["results_file"] for r in oracles], task=task, name="oracle")
        summary, _ = klom(u.margins, o.margins, u.splits or None)
        summary["inputs"] = {"unlearned": [r["id"] for r in runs], "oracle": [r["id"] for r in oracles]}
        out["klom"] = summary
        if split in summary["splits"]:
            out[KLOM] = {"mean": summary["splits"][split]["p95"], "sd": None, "n": 1}
        if spec.klom["ulira"]:
            attack, _ = ulira(u.margins, o.margins, (u.splits or {}).get(split))
            out["ulira"] = attack
            out[ULIRA] = {"mean": attack["accuracy"], "sd": None, "n": 1}
    except KlomInputError as e:
        out["klom"] = {"error": str(e)}
    return out


def _ineligible(rule: Selection, means: dict, baseline) -> str | None:
    failed = []
    for check in rule.conditions:
        try:
            outcome = evaluate(check, lookup_in(means, "the setting's mean results"), baseline)
        except MissingValue as e:
            failed.append(str(e))
            continue
        if not outcome.passed:
            failed.append(outcome.message)
    return "; ".join(failed) or None


# --------------------------------------------------------------------------- the files
def _spread_text(spread: dict[str, Any] | None) -> str:
    """``mean ± sd``; with seeds that have no value, ``mean (n=1 of 2; no value: seed 1)``."""
    if not spread or spread.get("mean") is None:
        return MISSING
    mean = format_number(spread["mean"])
    text = f"{mean} ± {format_number(spread['sd'])}" if spread["n"] > 1 else mean
    missing = spread.get("missing_seeds")
    if missing:
        seeds = ", ".join(str(s) for s in missing)
        text += f" (n={spread['n']} of {spread['n'] + len(missing)}; no value: seed{'s' if len(missing) > 1 else ''} {seeds})"
    return text


def _values(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "defaults"


def markdown(board: dict[str, Any], png: str | None) -> str:
    c = board["counts"]
    lines = [f"# Sweep leaderboard: `{board['spec']}`", "",
             f"{c['trials']} trials: {c['ok']} ok, {c['failed']} failed, "
             + (f"{c['stopped']} stopped early, " if c.get("stopped") else "")
             + f"{c['trials'] - c['finished']} not run. "
             f"Selection: `{board['select'] or 'none (every setting)'}`"
             + (f" among settings passing {', '.join(f'`{t}`' for t in board['select_if'])}" if board["select_if"]
                else "") + ". Values are mean ± sample sd over seeds."
             + (f" {KLOM} and {ULIRA} compare the setting's seeds (one model each) with the oracle trials on the "
                f"`{board['klom']['split']}` split of `{board['klom']['task']}`." if board.get("klom") else ""), ""]
    axes = list(board["pareto"]) + attack_columns(board)
    place = place_columns(board)
    head = ["method", "setting", *place, "seeds", "score", *axes, "checks", "trials"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in board["leaderboard"]:
        cells = [row["method"], _values(row["values"]), *_place(place, row), str(len(row["seeds"])),
                 _spread_text(row.get("score")),
                 *(_spread_text(row.get(a)) for a in axes), "pass" if row["checks_passed"] else "FAIL",
                 " ".join(row["trials"])]
        lines.append("| " + " | ".join(cells) + " |")
    if png:
        lines += ["", f"![forget vs utility, Pareto front]({png})", "",
                  f"Pareto front: {', '.join(board['pareto_front']) or 'none'}"]
    axes = list(board["pareto"])
    lines += ["", "## All trials", "", "| trial | method | setting | " + "".join(f"{c} | " for c in place)
              + "seed | status | " + " | ".join(axes) + " | results file | wall s |",
              "|" + "---|" * (7 + len(place) + len(axes))]
    for r in board["trials"]:
        point = board["pareto_points"].get(r["id"])
        axis_cells = [format_number(v) if point and v is not None and math.isfinite(v) else MISSING
                      for v in (point or [None] * len(axes))]
        status = r["status"] if r["status"] == "ok" else f"failed: {str(r.get('error', ''))[:80]}"
        if r["status"] == "stopped":
            status = f"stopped at step {r['stopped']['step']}: {r['stopped']['rule']}"
        lines.append("| " + " | ".join([r["id"], r["method"], _values(r.get("values") or {}), *_place(place, r),
                                        str(r["seed"]),
                                        status.replace("|", "/"), *axis_cells, f"`{r.get('results_file', '')}`",
                                        str(r.get("wall_s", ""))]) + " |")
    sw = board["provenance"]["software"]
    lines += ["", "## Provenance", "", f"- spec sha256 `{board['spec_sha256']}`",
              f"- {sw.get('package')} {sw.get('version')} (git {sw.get('git_commit') or MISSING})",
              "- every number above is read from the trial's lm-eval results file listed in the table; "
              "leaderboard.json lists each file's SHA-256"]
    return "\n".join(lines) + "\n"


def _html_sections(board: dict[str, Any], png_uri: str | None) -> list[Markup]:
    """The leaderboard section of leaderboard.html (template ``sweep_board.html``): the board, the picture (a PNG
    data URI), every trial."""
    from unlearn_app.pages import fragment

    axes = list(board["pareto"]) + attack_columns(board)
    place = place_columns(board)
    rows = [[r["method"], _values(r["values"]), *_place(place, r), len(r["seeds"]), _spread_text(r.get("score")),
             *(_spread_text(r.get(a)) for a in axes), "pass" if r["checks_passed"] else "FAIL"]
            for r in board["leaderboard"]]
    trial_rows = [[r["id"], r["method"], _values(r.get("values") or {}), *_place(place, r), r["seed"], r["status"],
                   r.get("error") or _stop_text(r.get("stopped")), r.get("results_file", ""), r.get("wall_s", "")]
                  for r in board["trials"]]
    return [fragment("sweep_board.html", select=board["select"] or "none",
                     head=["method", "setting", *place, "seeds", "score", *axes, "checks"], rows=rows,
                     picture_uri=png_uri, trial_head=["trial", "method", "setting", *place, "seed", "status", "error",
                                                  "results file", "wall s"], trial_rows=trial_rows)]


def _stop_text(stopped: dict[str, Any] | None) -> str:
    return f"at step {stopped['step']}: {stopped['rule']} (value {stopped['value']:.4g})" if stopped else ""


def write_leaderboard(spec: Spec, out: str | Path) -> list[Path]:
    """Write ``out/leaderboard.{json,md,html}`` (and ``.png`` with a ``pareto`` spec); returns their paths. The
    folder must hold this sweep (:func:`~unlearn_app.sweep.engine.check_folder`) and every finished trial's
    results file; the files are written together (each complete under a temporary name, then all renamed) or,
    on any error, not at all."""
    out = Path(out)
    check_folder(spec, out, resume=True, existing=True)
    with hold(out):
        return _write_held(spec, out)


def _write_held(spec: Spec, out: Path) -> list[Path]:
    from harness_ext.provenance import file_sha256
    from unlearn_app.reports import plots
    from unlearn_app.reports.evaluated_run import load_run
    from unlearn_app.reports.html_page import _png, render_html

    board = summarize(spec, read_records(out), out)
    for r in board["trials"]:
        if r.get("results_file") and not (out / r["results_file"]).is_file():
            raise SweepError(f"--out {out}: the results file of trial {r['id']} ({r['results_file']}) is missing "
                             "(was its folder removed?); restore it, or delete the trial's line from "
                             f"{TRIALS_FILE} and run the sweep with --resume to rerun it")
    board["provenance"]["results_files"] = {
        r["id"]: {"path": r["results_file"], "sha256": file_sha256(out / r["results_file"])}
        for r in board["trials"] if r.get("results_file")}
    staged: dict[Path, Path] = {}  # final path -> its complete temporary
    tag = f".tmp-{os.getpid()}"
    try:
        png = None
        if board["pareto_points"]:
            methods = {r["id"]: r["method"] for r in board["trials"]}
            points = {k: (v[0], v[1], methods[k]) for k, v in board["pareto_points"].items()}
            utility, forget = spec.pareto["utility"], spec.pareto["forget"]
            png = out / "leaderboard.png"
            staged[png] = plots.pareto_scatter(points, board["pareto_front"], out / f".leaderboard{tag}.png",
                                               utility.text.rsplit(":", 1)[0], forget.text.rsplit(":", 1)[0],
                                               (utility.mode, forget.mode))
        texts = {out / "leaderboard.json": json.dumps(json_safe(board), indent=2, default=str),
                 out / "leaderboard.md": markdown(board, png.name if png else None)}
        runs = [load_run(out / r["results_file"], f"{r['method']} seed {r['seed']} ({r['id']})")
                for row in board["leaderboard"] for r in board["trials"]
                if r["id"] in row["trials"] and r.get("results_file")]
        uri = _png(lambda p: p.write_bytes(staged[png].read_bytes())) if png else None
        texts[out / "leaderboard.html"] = render_html(runs, f"Sweep leaderboard: {spec.path}",
                                                      sections=_html_sections(board, uri))
        for path, text in texts.items():
            staged[path] = out / f".{path.stem}{tag}{path.suffix}"
            staged[path].write_text(text, encoding="utf-8")
        for path, tmp in staged.items():
            os.replace(tmp, path)
    finally:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
    return [out / "leaderboard.md", out / "leaderboard.json", out / "leaderboard.html", *([png] if png else [])]
