"""The training benchmark's plumbing (benchmarks/bench_train_vs_ou.py): the update difference, the steps, our pairing
given to open-unlearning's dataset through its launcher, the table, the process-tree memory and the refusal of a
folder that is no open-unlearning checkout; values computed by hand, offline, no model."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fixtures.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_train_vs_ou.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(SCRIPT)


def test_relative_l2_of_the_updates_by_value(bench) -> None:
    start = {"a": torch.tensor([0.0, 0.0]), "b": torch.tensor([1.0])}
    theirs = {"a": torch.tensor([3.0, 0.0]), "b": torch.tensor([1.0])}  # their update: (3, 0, 0), norm 3
    ours = {"a": torch.tensor([3.0, 4.0]), "b": torch.tensor([1.0])}    # ours - theirs: (0, 4, 0), norm 4
    assert bench.relative_l2(ours, theirs, start) == pytest.approx(4 / 3)
    assert bench.relative_l2(theirs, theirs, start) == 0.0
    assert bench.relative_l2(start, start, start) == 0.0          # neither moved
    assert bench.relative_l2(ours, start, start) == math.inf      # ours moved, theirs did not


@pytest.mark.parametrize(("steps", "n", "batch"), [(2, 6, 4), (4, 6, 4), (3, 24, 4), (7, 40, 8), (10, 3, 1)])
def test_our_epochs_give_the_trainer_that_many_steps(bench, steps, n, batch) -> None:
    per_epoch = -(-n // batch)
    assert math.ceil(bench.our_epochs(steps, n, batch) * per_epoch) == steps  # how the Trainer rounds a fraction


def test_pairing_is_ours(bench) -> None:
    forget = [{"question": f"q{i}", "answer": "a"} for i in range(3)]
    retain = [{"question": f"r{i}", "answer": "a"} for i in range(5)]
    p = bench.pairing(forget, retain, ["A", "B", "C"], seed=0)
    # random.Random(0): the retain order shuffled to [2, 1, 0, 4, 3], then the refusals drawn C, B, B
    assert p["retain"] == [2, 1, 0]
    assert p["idk"] == {"q0": "C", "q1": "B", "q2": "B"}
    assert p["seed"] == 0 and p["lora"] == bench.LORA


def _fake_checkout(root: Path) -> Path:
    """A folder laid out like open-unlearning's src/ with stand-ins (written here) for the classes the launcher
    patches, and a train.py that prints what they return."""
    src = root / "src"
    (src / "data").mkdir(parents=True)
    (src / "model").mkdir()
    (src / "data" / "__init__.py").write_text("")
    (src / "data" / "unlearn.py").write_text(
        "class ForgetRetainDataset:\n"
        "    def __init__(self, forget, retain):\n        self.forget, self.retain = forget, retain\n"
        "    def __getitem__(self, idx):\n        raise AssertionError('not patched')\n")
    (src / "data" / "qa.py").write_text(
        "class QAwithIdkDataset:\n"
        "    def _process_sample(self, question, answer):\n        return question + ' -> ' + answer\n"
        "    def item_with_idk(self, question):\n        raise AssertionError('not patched')\n")
    (src / "model" / "__init__.py").write_text("MODEL_REGISTRY = {}\n")
    (src / "train.py").write_text(
        "import json, sys\nfrom data.unlearn import ForgetRetainDataset\nfrom data.qa import QAwithIdkDataset\n"
        "from model import MODEL_REGISTRY\n"
        "ds = ForgetRetainDataset(['f0', 'f1', 'f2'], ['r0', 'r1', 'r2', 'r3', 'r4'])\n"
        "print(json.dumps({'items': [ds[i] for i in range(3)], 'idk': QAwithIdkDataset().item_with_idk('q1'),\n"
        "                  'handlers': sorted(MODEL_REGISTRY), 'argv': sys.argv[1:]}))\n")
    return src / "train.py"


def test_launcher_gives_open_unlearning_our_pairing(bench, tmp_path) -> None:
    train = _fake_checkout(tmp_path / "ou")
    forget = [{"question": f"q{i}", "answer": "a"} for i in range(3)]
    retain = [{"question": f"r{i}", "answer": "a"} for i in range(5)]
    pairing_file = tmp_path / "pairing.json"
    pairing_file.write_text(json.dumps(bench.pairing(forget, retain, ["A", "B", "C"], seed=0)))
    launcher = tmp_path / "launcher.py"
    launcher.write_text(bench.OU_TRAIN_LAUNCHER)
    proc = subprocess.run([sys.executable, str(launcher), str(train), "trainer=NPO"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", bench.PAIRING_ENV: str(pairing_file), "HF_HUB_OFFLINE": "1"},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["items"] == [{"forget": "f0", "retain": "r2"}, {"forget": "f1", "retain": "r1"},
                            {"forget": "f2", "retain": "r0"}]
    assert out["idk"] == "q1 -> B"
    assert out["handlers"] == ["BenchLoraCausalLM"]
    assert out["argv"] == ["trainer=NPO"]


def test_commands_run_the_same_steps(bench, tmp_path) -> None:
    npo = bench.METHODS["npo"]
    ours = bench.our_command(npo, "M", tmp_path, "forget01", "retain99", True, 2, 6, 4, 1e-5, tmp_path / "idk",
                             tmp_path / "out")
    assert ours[ours.index("--epochs") + 1] == repr(2 / 2 - 1e-6)
    assert "--lora" in ours and ours[ours.index("--batch-size") + 1] == "4"
    assert ["--param", "beta=0.1"] == ours[ours.index("--param"):ours.index("--param") + 2]
    rmu = bench.our_command(bench.METHODS["undial"], "M", tmp_path, "forget01", "retain99", False, 2, 6, 4, 1e-5,
                            tmp_path / "idk", tmp_path / "out")
    assert "all_positions=true" in rmu and "--full" in rmu and "--save-steps" not in rmu
    quiet = bench.our_command(npo, "M", tmp_path, "forget01", "retain99", False, 2, 6, 4, 1e-5, tmp_path / "idk",
                              tmp_path / "out", checkpoints=False)
    assert quiet[quiet.index("--save-steps") + 1] == "3"  # after the last step: no checkpoint before the end
    ou = bench.ou_command(Path("py"), Path("l.py"), Path("/ou"), npo, "M", "forget01", "retain99", True, 2, 4, 1e-5,
                          tmp_path / "ou-out")
    for override in ("trainer=NPO", "experiment=unlearn/tofu/default", "+trainer.args.max_steps=2",
                     "trainer.args.per_device_train_batch_size=4", "trainer.args.gradient_accumulation_steps=1",
                     "trainer.args.weight_decay=0.0", "+trainer.args.lr_scheduler_type=constant",
                     "~trainer.args.warmup_epochs", "+model.model_handler=BenchLoraCausalLM",
                     "holdout_split=holdout01"):
        assert override in ou
    assert ou[:4] == ["py", "l.py", "/ou/src/train.py", "--config-name=unlearn.yaml"]
    idk = bench.ou_command(Path("py"), Path("l.py"), Path("/ou"), bench.METHODS["idkdpo"], "M", "forget10",
                           "retain90", False, 2, 4, 1e-5, tmp_path / "ou-out")
    assert "experiment=unlearn/tofu/idk" in idk and "trainer=DPO" in idk
    assert not any("model_handler" in a or "holdout_split" in a for a in idk)  # the idk experiment has no holdout


def test_setting_row_and_table(bench) -> None:
    pairs = [{"ours": {"wall": 10.0, "step": 2.0, "outside": 8.0, "rss": 100 * 2 ** 20},
              "ou": {"wall": 20.0, "step": 2.0, "outside": 18.0, "rss": 200 * 2 ** 20}, "l2": 1e-6},
             {"ours": {"wall": 12.0, "step": 3.0, "outside": 9.0, "rss": 100 * 2 ** 20},
              "ou": {"wall": 16.0, "step": None, "outside": None, "rss": 200 * 2 ** 20}, "l2": 3e-6}]
    row = bench.setting_row({"method": "NPO", "forget": "forget01", "weights": "full", "threads": 1}, pairs)
    assert row["ours_wall"] == 11.0 and row["ou_wall"] == 18.0
    assert row["wall_ratio"] == pytest.approx((0.5 + 0.75) / 2)  # the median of the per-pair ratios
    assert row["step_ratio"] == 1.0                              # the pair without OU's step time left out
    assert row["rss_ratio"] == 0.5 and row["l2"] == 3e-6 and row["pairs"] == 2
    assert row["ours_outside"] == 8.5 and row["ou_outside"] == 18.0  # the time outside the steps, each side's median
    assert row["outside_ratio"] == pytest.approx(8.0 / 18.0)      # from the one pair with both
    table = bench.markdown(["2026-11-29 13:00 UTC, a machine", "versions"], [row])
    lines = table.splitlines()
    assert lines[:2] == ["2026-11-29 13:00 UTC, a machine", "versions"]
    assert lines[-1] == ("| NPO | forget01 | full | 1 | 2 | 11.0 / 18.0 | 0.62 | 2.50 / 2.00 | 1.00 | 8.5 / 18.0 | "
                         "100 / 200 | 0.50 | 3.0e-06 |")
    assert lines[-2].count("|") == lines[-3].count("|") == lines[-1].count("|")


def test_peak_memory_of_the_process_tree(bench) -> None:
    child = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'x = bytearray(150 * 2**20); " \
            "import time; time.sleep(1.0)'])"
    wall, rss, _ = bench.timed_run([sys.executable, "-c", child], {"PATH": "/usr/bin:/bin"})
    assert rss > 150 * 2 ** 20 and wall > 1.0  # the grandchild's 150 MiB counted
    with pytest.raises(bench.RunFailed, match=r"failed \(exit 3\):\nbad input"):
        bench.timed_run([sys.executable, "-c", "import sys; print('bad input'); sys.exit(3)"], {"PATH": "/usr/bin:/bin"})


def test_refuses_a_folder_without_open_unlearning(tmp_path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--open-unlearning", str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"--open-unlearning {tmp_path}: no src/train.py and configs/unlearn.yaml there; "
                                   "pass a checkout of github.com/locuslab/open-unlearning.")
