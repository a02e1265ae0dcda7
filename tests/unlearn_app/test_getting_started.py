"""docs/getting-started.md: its commands, read from the page, parse, name real tasks, metrics and flags, and hand
each step's output to the next (the folder `unlearn run --data demo` writes its corpus into, the adapter, the runs
`lm_eval` writes, the suite's baseline); and the page's commands run as written, top to bottom, on the tiny
memorised model in place of SmolLM2 (slow: SmolLM2 takes tens of minutes on a CPU; the page's excerpts come from
such a run)."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"


def fenced(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", PAGE.read_text(), flags=re.S | re.M)


def commands() -> list[list[str]]:
    """Every command of the page's bash blocks, continuation lines joined, comments dropped, split at `;`."""
    out: list[list[str]] = []
    for block in fenced("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            current: list[str] = []
            for word in shlex.split(line, comments=True):
                current.append(word.removesuffix(";"))
                if word.endswith(";"):
                    out.append(current)
                    current = []
            out += [current] if current else []
    return out


def flags(words: list[str]) -> dict[str, str]:
    return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}


@pytest.fixture(scope="module")
def steps() -> dict[str, list[list[str]]]:
    by_program: dict[str, list[list[str]]] = {}
    for command in commands():
        key = " ".join(command[:2]) if command[0] == "unlearn" else command[0]
        by_program.setdefault(key, []).append(command)
    return by_program


def test_the_page_commands_parse_and_chain(steps, tmp_path, tiny_model_dir):
    from unlearn_app.ci.runner import build_tasks, task_metric_names
    from unlearn_app.ci.suite import load_suite, validate_checks
    from unlearn_app.cli import build_parser
    from unlearn_methods.config import RunConfig
    from unlearn_tasks.tofu.options import TofuOptions

    parser = build_parser()
    (model,) = [key.removeprefix("MODEL=") for key in steps if key.startswith("MODEL=")]
    unlearn = [c for key, cs in steps.items() if key.startswith("unlearn ") for c in cs]
    assert [c[1] for c in unlearn] == ["run", "report", "ci"]
    for command in unlearn:  # every `unlearn` command parses as written (a renamed flag or subcommand fails)
        parser.parse_args([w.replace("$MODEL", model) for w in command[1:]])

    (run,) = steps["unlearn run"]
    out = flags(run)["--out"]
    config = RunConfig(model=model, out=out, data=flags(run)["--data"], forget=flags(run)["--forget"])
    data_dir = Path(config.source.local_data(config, tmp_path / out)).relative_to(tmp_path).as_posix()
    assert data_dir == f"{out}/demo_data"  # where `--data demo` writes the corpus: the page's data_dir
    evaluations = [c for c in steps["lm_eval"] if "--model" in c]
    quick = [c for c in evaluations if "max_items_per_split" in flags(c)["--metadata"]]
    base, npo = [c for c in evaluations if c not in quick]
    # the quick path comes first: the same two evaluations, two items per split, into the same folders
    assert len(quick) == 2 and evaluations.index(quick[-1]) < evaluations.index(base)
    for fast, full in zip(quick, (base, npo)):
        assert {k: v for k, v in flags(fast).items() if k != "--metadata"} == {
            k: v for k, v in flags(full).items() if k != "--metadata"}
        options = json.loads(flags(fast)["--metadata"])
        assert options.pop("max_items_per_split") == 2 and options == json.loads(flags(full)["--metadata"])
    assert TofuOptions.from_metadata(json.loads(flags(quick[0])["--metadata"])).max_items_per_split == 2
    assert flags(base)["--model_args"] == "pretrained=$MODEL"
    assert flags(npo)["--model_args"] == f"pretrained=$MODEL,peft={out}"  # the adapter `unlearn run` wrote
    for command in (base, npo):
        assert json.loads(flags(command)["--metadata"]) == {"data_dir": data_dir}
    tasks = flags(base)["--tasks"].split(",")
    assert flags(npo)["--tasks"] == flags(base)["--tasks"]  # tasks that exist: the suite's, built below
    runs = [flags(base)["--output_path"], flags(npo)["--output_path"]]
    (report,) = steps["unlearn report"]
    assert report[2:] == runs

    (suite_text,) = fenced("yaml")
    suite_data = yaml.safe_load(suite_text)
    assert suite_data["tasks"] == tasks and suite_data["metadata"] == {"data_dir": data_dir}
    assert suite_data["baseline"] == runs[0]
    (ci,) = steps["unlearn ci"]
    assert flags(ci)["--from-results"] == runs[1] and flags(ci)["--suite"] == suite_text.split("\n")[0].lstrip("# ")
    # the suite loads, and its checks name metrics the task reports (built on the tiny model and the demo corpus)
    path = tmp_path / "suite.yaml"
    path.write_text(suite_text.replace(data_dir, str(tmp_path / data_dir)))
    suite = load_suite(str(path))
    _, built, groups = build_tasks(suite, {"pretrained": str(tiny_model_dir)})
    validate_checks(suite, {n: task_metric_names(t) for n, t in built.items()}, groups)


#: The page's commands the run below leaves out, and why: it runs in the installed package, on the tiny model.
NOT_RUN = {
    "pip install": "the tests run in the installed package",
    "python -m unlearn_methods.pretrained": "builds SmolLM2 from a PyPI download; MODEL is the tiny model here",
    "lm_eval ls tasks": "indexes every lm-eval task (11 minutes on a loaded 2-core machine); run by "
                        "tests/unlearn_app/test_cli.py::test_lm_eval_ls_lists_our_tasks",
    '"max_items_per_split": 2': "the quick path: the full run's commands with two items per split (checked by "
                                "test_the_page_commands_parse_and_chain); the full run runs below",
}


def page_script(model: Path) -> tuple[str, list[str]]:
    """The page's bash blocks as one script (continuation lines joined), MODEL set to ``model``, and the lines left
    out (:data:`NOT_RUN`)."""
    lines, left_out = [], []
    for block in fenced("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            if any(start in line for start in NOT_RUN):
                left_out.append(line)
            elif line.startswith("MODEL="):
                lines.append(f"MODEL={shlex.quote(str(model))}")
            else:
                lines.append(line)
    return "\n".join(lines) + "\n", left_out


@pytest.mark.slow
def test_the_page_runs_as_written_on_the_tiny_model(memorised_tiny_dir, tmp_path):
    """Every command of the page in order, in one shell, in an empty folder: `unlearn run` writes the adapter and
    the corpus, both `lm_eval` runs read them, `unlearn report` compares the runs, and `unlearn ci` gates the
    adapter's run against the base run with the page's suite file: its printed values and bounds are the numbers of
    the two results files, and its exit status says whether the checks passed."""
    import subprocess
    import sys

    script, left_out = page_script(memorised_tiny_dir)
    skipped = [next(k for k in NOT_RUN if k in line) for line in left_out]
    assert list(dict.fromkeys(skipped)) == list(NOT_RUN)  # nothing else is skipped
    (suite_text,) = fenced("yaml")
    (tmp_path / suite_text.split("\n")[0].lstrip("# ")).write_text(suite_text)
    prelude = (f'unlearn() {{ {shlex.quote(sys.executable)} -m unlearn_app "$@"; }}\n'
               f'lm_eval() {{ {shlex.quote(sys.executable)} -m lm_eval "$@"; }}\n')
    proc = subprocess.run(["bash", "-c", prelude + script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=3000, env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"})
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "ckpt/npo/adapter_config.json").is_file() and (tmp_path / "ckpt/npo/demo_data").is_dir()
    results = {}
    for run in ("base", "npo"):
        (file,) = (tmp_path / "runs" / run).rglob("results_*.json")
        results[run] = json.loads(file.read_text())["results"]["tofu_forget01"]
        assert f"- {run}: runs/{run}/" in out  # `unlearn report` names the file it read
    assert "## tofu_forget01" in out and "| metric | base | npo |" in out

    checks = re.findall(r"^(pass|FAIL) tofu_forget01/(\w+) (<=|>=) ([\d.]+) \* baseline: value (\S+) (?:<=|>=) bound "
                        r"(\S+)", out, flags=re.M)
    assert [c[1] for c in checks] == ["forget_prob", "model_utility"]  # the suite's two checks, printed once each
    for verdict, metric, op, factor, value, bound in checks:
        npo, base = results["npo"][f"{metric},none"], results["base"][f"{metric},none"]
        assert float(value) == pytest.approx(npo, rel=1e-3) and float(bound) == pytest.approx(float(factor) * base,
                                                                                              rel=1e-3)
        assert (verdict == "pass") == (npo <= float(factor) * base if op == "<=" else npo >= float(factor) * base)
    status = 0 if all(c[0] == "pass" for c in checks) else 1
    assert out.rstrip().endswith(f"exit status {status}")
    assert json.loads((tmp_path / "ci-out/results.json").read_text())["passed"] == (status == 0)
