"""``unlearn klom`` / ``unlearn ulira`` as a user runs them: input forms, output schema, exit codes, error messages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fixtures.commands import run_command
from unlearn_app.cli import main
from unlearn_tasks.margins.ensemble import RESULTS_KEY
from unlearn_tasks.metrics.klom import klom, margins_from_logits
from unlearn_tasks.metrics.ulira import ulira

SPLITS = {"forget": list(range(10)), "retain": list(range(10, 60))}


@pytest.fixture()
def ensembles(tmp_path: Path) -> tuple[np.ndarray, np.ndarray, Path]:
    rng = np.random.default_rng(0)
    u = rng.normal(1.0, 1.0, (12, 60))
    o = rng.normal(0.0, 1.0, (9, 60))
    np.save(tmp_path / "u.npy", u)
    np.save(tmp_path / "o.npy", o)
    (tmp_path / "splits.json").write_text(json.dumps(SPLITS))
    return u, o, tmp_path


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_klom_npy_ensembles_schema_and_values(ensembles, capsys):
    u, o, d = ensembles
    code, out, _ = _run(["klom", "--unlearned", str(d / "u.npy"), "--oracle", str(d / "o.npy"), "--splits",
                         str(d / "splits.json"), "--out", str(d / "r.json"), "--per-sample-out", str(d / "ps.npy")],
                        capsys)
    assert code == 0
    result = json.loads((d / "r.json").read_text())
    want, per_sample = klom(u, o, SPLITS)
    assert result["direction"] == "unlearned-oracle" and result["binning"] == "easydub"
    assert set(result["splits"]) == {"forget", "retain"}
    for name in SPLITS:
        assert set(result["splits"][name]) == {"p95", "mean", "n"}
        assert result["splits"][name]["p95"] == pytest.approx(want["splits"][name]["p95"], abs=1e-12)
        assert result["splits"][name]["n"] == len(SPLITS[name])
    saved = np.load(d / "ps.npy")
    assert saved.shape == (60,) and np.allclose(saved, per_sample, equal_nan=True)
    assert "forget  p95" in out


def test_klom_options_and_whole_set(ensembles, capsys):
    u, o, d = ensembles
    code, _, _ = _run(["klom", "--unlearned", str(d / "u.npy"), "--oracle", str(d / "o.npy"), "--out",
                       str(d / "r.json"), "--direction", "oracle-unlearned", "--binning", "a2d", "--quiet"], capsys)
    assert code == 0
    result = json.loads((d / "r.json").read_text())
    want, _ = klom(u, o, direction="oracle-unlearned", binning="a2d")
    assert (result["direction"], result["binning"]) == ("oracle-unlearned", "a2d")
    assert result["splits"]["all"]["mean"] == pytest.approx(want["splits"]["all"]["mean"], abs=1e-12)


def test_per_model_files_logits_and_plot(ensembles, capsys):
    u, o, d = ensembles
    for i, row in enumerate(u):
        np.save(d / f"u{i}.npy", row)
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(9, 60, 5))
    labels = rng.integers(0, 5, size=60)
    np.savez(d / "o_logits.npz", logits=logits, labels=labels)
    np.save(d / "o_logits.npy", logits)
    np.save(d / "labels.npy", labels)
    args = ["klom", "--unlearned", *[str(d / f"u{i}.npy") for i in range(12)], "--oracle", str(d / "o_logits.npz"),
            "--out", str(d / "r.json"), "--plot-samples", "0,3", "--plot", str(d / "h.png")]
    assert _run(args, capsys)[0] == 0
    want, _ = klom(u, margins_from_logits(logits, np.broadcast_to(labels, (9, 60))))
    assert json.loads((d / "r.json").read_text())["splits"]["all"]["mean"] == pytest.approx(want["splits"]["all"]["mean"])
    assert (d / "h.png").stat().st_size > 1000
    # logits .npy + --labels: every input is read as logits, so give logits on both sides
    args = ["klom", "--unlearned", str(d / "o_logits.npy"), "--oracle", str(d / "o_logits.npy"), "--labels",
            str(d / "labels.npy"), "--out", str(d / "r2.json")]
    assert _run(args, capsys)[0] == 0
    assert json.loads((d / "r2.json").read_text())["splits"]["all"]["mean"] == 0.0


def _lm_eval_run(folder: Path, margins: list[float], splits: dict, hash_: str = "abc") -> Path:
    folder.mkdir(parents=True)
    record = {"format": "unlearning_margins/1", "reduction": "mean", "margins": margins, "splits": splits,
              "sample_hash": hash_}
    (folder / "results_2026-01-01T00-00-00.json").write_text(
        json.dumps({"results": {}, "configs": {"margins_x": {"task": "margins_x", RESULTS_KEY: record}}}))
    return folder


def test_lm_eval_folders_carry_splits(tmp_path, capsys):
    rng = np.random.default_rng(2)
    splits = {"forget": [0, 1, 2], "retain": [3, 4, 5, 6]}
    u = rng.normal(1, 1, (4, 7))
    o = rng.normal(0, 1, (4, 7))
    ud = [str(_lm_eval_run(tmp_path / f"u{i}", row.tolist(), splits)) for i, row in enumerate(u)]
    od = [str(_lm_eval_run(tmp_path / f"o{i}", row.tolist(), splits)) for i, row in enumerate(o)]
    assert _run(["klom", "--unlearned", *ud, "--oracle", *od, "--out", str(tmp_path / "r.json")], capsys)[0] == 0
    result = json.loads((tmp_path / "r.json").read_text())
    want, _ = klom(u, o, splits)
    assert result["splits"]["forget"]["mean"] == pytest.approx(want["splits"]["forget"]["mean"])
    # a run over other samples is refused
    other = str(_lm_eval_run(tmp_path / "other", o[0].tolist(), splits, hash_="zzz"))
    code, _, err = _run(["klom", "--unlearned", *ud, "--oracle", other, *od, "--out", str(tmp_path / "r.json"),
                         "--overwrite"], capsys)
    assert code == 2 and "scored other samples" in err and "other" in err


@pytest.mark.parametrize(
    "case, message",
    [
        ("mismatch", "unlearned ensemble has 60 samples per model but the oracle ensemble has 59"),
        ("nan", "has 1 NaN margins (first: sample 4 of model 2)"),
        ("empty_split", "split 'forget' is empty"),
        ("out_of_range", "index 60 is out of range for 60 samples"),
        ("bad_file", "expected a .npy / .npz file or an lm-eval output folder"),
        ("missing", "does not exist"),
        ("no_margins_folder", "No lm-eval results_*.json under"),
        ("bad_plot", "not valid sample indices"),
    ],
)
def test_klom_errors_exit_2_with_a_message(ensembles, capsys, case, message):
    u, o, d = ensembles
    uo = ["--unlearned", str(d / "u.npy"), "--oracle", str(d / "o.npy")]
    extra: list[str] = []
    if case == "mismatch":
        np.save(d / "o59.npy", o[:, :59])
        uo[3] = str(d / "o59.npy")
    elif case == "nan":
        bad = u.copy()
        bad[2, 4] = np.nan
        np.save(d / "bad.npy", bad)
        uo[1] = str(d / "bad.npy")
    elif case == "empty_split":
        (d / "s.json").write_text(json.dumps({"forget": []}))
        extra = ["--splits", str(d / "s.json")]
    elif case == "out_of_range":
        (d / "s.json").write_text(json.dumps({"forget": [0, 60]}))
        extra = ["--splits", str(d / "s.json")]
    elif case == "bad_file":
        uo[1] = str(d / "splits.json")
    elif case == "missing":
        uo[1] = str(d / "nope.npy")
    elif case == "no_margins_folder":
        (d / "empty_run").mkdir()
        uo[1] = str(d / "empty_run")
    elif case == "bad_plot":
        extra = ["--plot-samples", "0,99"]
    code, _, err = _run(["klom", *uo, *extra, "--out", str(d / "r.json")], capsys)
    assert code == 2
    assert err.startswith("error: ") and message in err


def test_ulira_cli(ensembles, capsys):
    u, o, d = ensembles
    code, out, _ = _run(["ulira", "--unlearned", str(d / "u.npy"), "--oracle", str(d / "o.npy"), "--splits",
                         str(d / "splits.json"), "--out", str(d / "ul.json"), "--per-sample-out", str(d / "pe.npy")],
                        capsys)
    assert code == 0 and "AUROC" in out
    result = json.loads((d / "ul.json").read_text())
    want, _ = ulira(u, o, SPLITS["forget"])
    assert result["split"] == "forget" and result["protocol"] == "9-fold"
    assert result["auroc"] == pytest.approx(want["auroc"]) and result["accuracy"] == pytest.approx(want["accuracy"])
    assert {"tpr", "tnr", "n_samples", "n_unlearned_targets", "n_oracle_targets", "variance"} <= set(result)
    assert np.load(d / "pe.npy").shape == (60,)
    code, _, err = _run(["ulira", "--unlearned", str(d / "u.npy"), "--oracle", str(d / "o.npy"), "--splits",
                         str(d / "splits.json"), "--split", "validation", "--out", str(d / "ul.json"), "--overwrite"],
                        capsys)
    assert code == 2 and "no split 'validation'" in err
    code, _, err = _run(["ulira", "--unlearned", str(d / "u.npy"), "--oracle", str(d / "o.npy"), "--target-oracle",
                         str(d / "o.npy"), "--out", str(d / "ul.json"), "--overwrite"], capsys)
    assert code == 2 and "--target-unlearned" in err


def test_klom_subprocess_help_and_run(ensembles):
    _, _, d = ensembles
    proc = run_command(["unlearn", "klom", "--help"], timeout=120)
    assert proc.returncode == 0 and "--direction" in proc.stdout and "--binning" in proc.stdout
    proc = run_command(["unlearn", "klom", "--unlearned", str(d / "u.npy"), "--oracle", str(d / "o.npy"), "--out",
                        str(d / "r.json")], timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((d / "r.json").read_text())["splits"]["all"]["n"] == 60
    proc = run_command(["unlearn", "klom", "--unlearned", str(d / "u.npy"), "--out", str(d / "r.json")], timeout=120)
    assert proc.returncode == 2 and "--oracle" in proc.stderr
