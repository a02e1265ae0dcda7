"""lm-eval's data parallelism (``accelerate launch -m lm_eval``, two CPU processes over gloo here) gives exactly the
numbers of one process, per-item samples included: each process scores its share of the requests, the main process
gathers them, so our corpus-level metrics (Truth Ratio, Forget Quality, MIA AUROCs, PrivLeak) see every item once.
``--limit 6`` keeps the runs short; the split still gives each process 3 items of every split. ``--batch_size 1``:
rows padded together in other groupings change float32 statistics in their last digits (the vocabulary variance of
Min-K%++ by 5e-4 at batch 4), on one process as on two."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

from fixtures.commands import launch, run_command

pytestmark = pytest.mark.slow


def _results(out: Path) -> tuple[dict, dict[str, list[dict]]]:
    (results_file,) = out.rglob("results_*.json")
    samples = {}
    for path in out.rglob("samples_*.jsonl"):
        task = path.name.removeprefix("samples_").rsplit("_", 1)[0]
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        samples[task] = sorted(({k: r[k] for k in ("doc_id", "resps", "filtered_resps") if k in r} for r in rows),
                               key=lambda r: r["doc_id"])
    return json.loads(results_file.read_text())["results"], samples


def _parsed(value):
    """A logged response written as the repr of a dict or list (our request types' records) read back."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return ast.literal_eval(value.replace("nan", "None").replace("inf", "None"))
        except (ValueError, SyntaxError):
            return value
    return value


def _same(a, b) -> bool:
    """Equal up to float summation order (the rows a process pads together differ from one process's)."""
    a, b = _parsed(a), _parsed(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-5, abs=1e-6)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


#: (task, model fixture, data fixture): a family each, with the metrics computed over the whole corpus
FAMILIES = [("tofu_forget01_likelihood", "tiny_model_dir", "demo_data_dir"),  # Truth Ratio, Forget Quality, MIAs
            ("muse_news", "muse_tiny_model_dir", "muse_data_dir")]  # VerbMem (ROUGE of generations), KnowMem, PrivLeak


@pytest.mark.parametrize(("task", "model", "data"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_two_processes_give_the_numbers_of_one(task, model, data, request, tmp_path):
    model_dir, data_dir = request.getfixturevalue(model), request.getfixturevalue(data)
    args = ["lm_eval", "--model", "hf", "--model_args", f"pretrained={model_dir},dtype=float32",
            "--tasks", task, "--batch_size", "1", "--log_samples", "--limit", "6",
            "--metadata", json.dumps({"data_dir": str(data_dir)})]
    one = run_command([*args, "--device", "cpu", "--output_path", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr[-3000:]
    two = launch([*args, "--output_path", str(tmp_path / "two")])
    assert two.returncode == 0, two.stderr[-3000:]
    assert f"{task} on rank 1" in two.stderr + two.stdout  # the second process built (and scored) its share
    results_one, samples_one = _results(tmp_path / "one")
    results_two, samples_two = _results(tmp_path / "two")
    metrics = {k for k in results_one[task] if k != "alias" and "_stderr" not in k}
    assert len(metrics) >= 5
    for name, values in results_one.items():
        for key, value in values.items():
            assert _same(results_two[name][key], value), (name, key, results_two[name][key], value)
    assert samples_one.keys() == samples_two.keys() and samples_one
    for name in samples_one:
        assert _same(samples_two[name], samples_one[name]), name
