"""docs/getting-started.md: its commands, read from the page, parse, name real tasks, metrics and flags, and hand
each step's output to the next (the folder `unlearn run --data demo` writes its corpus into, the adapter, the runs
`lm_eval` writes, the suite's baseline). Running them takes SmolLM2 tens of minutes on a CPU (the page's excerpts
come from such a run); each kind of step runs end to end in its own tests (`lm_eval` with `peft=` in
tests/unlearn_methods/test_smollm2.py, `unlearn ci --from-results` in tests/unlearn_app/test_ci.py)."""

from __future__ import annotations

import json
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
    base, npo = steps["lm_eval"]
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
