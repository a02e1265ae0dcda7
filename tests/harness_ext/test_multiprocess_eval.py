"""lm-eval's data parallelism (``accelerate launch -m lm_eval``, two CPU processes over gloo here) gives exactly the
numbers of one process, per-item samples included: each process scores its share of the requests, the main process
gathers them, so our corpus-level metrics (Truth Ratio, Forget Quality, MIA AUROCs, PrivLeak) see every item once."""

from __future__ import annotations

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


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-5, abs=1e-7)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_tofu_on_two_processes_gives_the_numbers_of_one(tiny_model_dir, demo_data_dir, tmp_path):
    args = ["lm_eval", "--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32",
            "--tasks", "tofu_forget01_likelihood", "--batch_size", "4", "--log_samples",
            "--metadata", json.dumps({"data_dir": str(demo_data_dir)})]
    one = run_command([*args, "--device", "cpu", "--output_path", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr[-3000:]
    two = launch([*args, "--output_path", str(tmp_path / "two")])
    assert two.returncode == 0, two.stderr[-3000:]
    results_one, samples_one = _results(tmp_path / "one")
    results_two, samples_two = _results(tmp_path / "two")
    metrics = {k for k in results_one["tofu_forget01_likelihood"] if k != "alias" and "_stderr" not in k}
    assert len(metrics) >= 10  # probability, Truth Ratio, Forget Quality, the MIAs, ...
    for task, values in results_one.items():
        for key, value in values.items():
            assert _same(results_two[task][key], value), (task, key, results_two[task][key], value)
    assert samples_one.keys() == samples_two.keys() and samples_one
    for task in samples_one:
        assert _same(samples_two[task], samples_one[task]), task
