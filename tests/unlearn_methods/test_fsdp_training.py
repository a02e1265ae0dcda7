"""`unlearn run` under FSDP2 on CPU processes (gloo): ``accelerate launch --config_file examples/scaling/fsdp-8b.yaml``
(the configuration docs/scaling.md gives GPU users) with ``--num_processes 2`` and 3, through the test-only shim
:mod:`fixtures.fsdp_on_cpu` (accelerate enables FSDP only for GPU process groups; the shim does on CPU what it does on
GPUs). The Trainer shards the weights, gradients and AdamW states (accelerate's ``fully_shard``), writes the periodic
checkpoints in parts (``SHARDED_STATE_DICT``: each process its own) and the finished model whole.

Each run is compared with one process at the same global batch and the same micro-batches
(``--batch-size B --grad-accum N`` against N processes of B rows): every row is then padded and scored as in the
sharded run, so the two take the same steps up to float64 summation order (the tiny model is saved in float64 and
loaded with ``--dtype auto``), and a difference is the sharding's. forget01 has 6 items, so an epoch of steps of 4
rows ends with an uneven step (2 rows, accelerate's 2 filler rows weighted 0) and the answers differ in length: a
step normalised per shard (each process's mean over its own rows or tokens) ends in other weights.

Every run of a process count shares one launch (``fsdp_on_cpu.py`` runs the commands one after the other in the same
processes), so the suite pays the processes' start-up once per count, and the one-process runs are made in the
test's process while the launch runs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from fixtures.commands import launch
from fixtures.weights import logged_losses, update_difference

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FSDP_CONFIG = REPO / "examples" / "scaling" / "fsdp-8b.yaml"
FSDP_ON_CPU = str(REPO / "tests" / "fixtures" / "fsdp_on_cpu.py")

#: The methods run sharded: a plain retain term, reference values computed once (NPO, IdkDPO), no reference
#: (SimNPO), a reference copy's logits each step (KL), a layer's hidden states of the model and its reference (RMU),
#: and a LoRA adapter.
METHODS = {
    "graddiff": ["--method", "graddiff", "--full"],
    "npo": ["--method", "npo", "--full"],
    "idkdpo": ["--method", "dpo", "--full"],
    "simnpo": ["--method", "simnpo", "--full"],
    "kl": ["--method", "kl", "--full"],
    "rmu": ["--method", "rmu", "--full"],
    "lora": ["--method", "npo", "--lora"],
}
TASK = "tofu_forget01_likelihood"
#: One global batch of 6 rows (forget01: a step per epoch) on 2 processes, on 3 and on one, in micro-batches of 1 row.
RECOUNT = {2: ["--batch-size", "1", "--grad-accum", "3"], 3: ["--batch-size", "1", "--grad-accum", "2"],
           1: ["--batch-size", "1", "--grad-accum", "6"]}


def _common(model: Path, data: Path) -> list[str]:
    return ["--model", str(model), "--dtype", "auto", "--data", "demo", "--data-dir", str(data), "--forget",
            "forget01", "--retain", "retain99", "--lr", "1e-3", "--quiet"]


def _one_process(args: list[str]) -> None:
    from unlearn_app.cli import main

    assert main([str(a) for a in args]) == 0


def _fsdp_launch(processes: int, commands: list[list[str]], env: dict[str, str] | None = None):
    program = ["unlearn"]
    for i, command in enumerate(commands):
        program += [*(["---"] if i else []), *map(str, command)]
    return launch(program, processes=processes, config_file=str(FSDP_CONFIG), script=FSDP_ON_CPU, env=env,
                  timeout=900)


@pytest.fixture(scope="module")
def tiny64(tiny_model_dir, tmp_path_factory) -> Path:
    """The tests' tiny Llama saved in float64 (``--dtype auto`` loads it so)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("tiny64")
    AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def two(tiny64, demo_data_dir, tmp_path_factory, request):
    """One launch of 2 FSDP processes (2 rows each): every method for 2 epochs; NPO for 1 epoch, then resumed from
    its sharded checkpoint to 2; ``--eval-every`` (refused); GA with a NaN loss on process 1 from step 1; NPO for 1
    epoch at the global batch of :data:`RECOUNT` (resumed on 3 processes by :func:`three`)."""
    root = tmp_path_factory.mktemp("fsdp2")
    common = [*_common(tiny64, demo_data_dir), "--batch-size", "2"]
    commands = [["run", *options, *common, "--epochs", "2", "--out", root / name] for name, options in METHODS.items()]
    commands += [["run", *METHODS["npo"], *common, "--epochs", "1", "--out", root / "resumed"],
                 ["run", *METHODS["npo"], *common, "--epochs", "2", "--resume", "--out", root / "resumed"],
                 ["run", *METHODS["graddiff"], *common, "--epochs", "2", "--eval-tasks", TASK, "--eval-every", "1",
                  "--out", root / "eval_every"],
                 ["run", "--method", "ga", "--full", *common, "--epochs", "2", "--out", root / "nan"],
                 ["run", *METHODS["npo"], *_common(tiny64, demo_data_dir), *RECOUNT[2], "--epochs", "1", "--out",
                  root / "recount"]]
    with ThreadPoolExecutor(1) as pool:  # the one-process runs while the processes start and train
        launched = pool.submit(_fsdp_launch, 2, commands, {"PROBE_NAN_ON_PROCESS": "1"})
        request.getfixturevalue("one")
        done = launched.result()
    errors = sorted({line for line in done.stderr.splitlines() if line.startswith("error: ")})
    return root, done, errors


@pytest.fixture(scope="module")
def one(tiny64, demo_data_dir, tmp_path_factory) -> Path:
    """The runs of :func:`two` in one process: 2 micro-batches of 2 rows a step."""
    root = tmp_path_factory.mktemp("one")
    for name, options in METHODS.items():
        _one_process(["run", *options, *_common(tiny64, demo_data_dir), "--batch-size", "2", "--grad-accum", "2",
                      "--epochs", "2", "--out", root / name])
    return root


#: How far N processes' update may be from one process's (relative L2). On 2 processes (and 4) the runs agree to
#: float64 rounding, 1e-16 to 3e-15. On 3, each process scales its float32 loss by 3 / (the step's count) where one
#: process scales by 1 / count: a factor 3 is not a power of two, so the float32 gradients of the logits round
#: elsewhere, and where the forget and retain terms nearly cancel in a component AdamW (which divides each by its
#: running scale) turns that into a step of the learning rate's size: measured 2.1e-6 to 1.3e-5 (SimNPO), against
#: 3e-2 and more for a step normalised per shard.
BOUND = {2: 1e-5, 3: 5e-5}


def _same_steps(base: Path, one: Path, sharded: Path, processes: int = 2) -> None:
    difference, update = update_difference(base, one, sharded)
    assert update > 1e-2  # the run moved the weights
    assert difference <= BOUND[processes]
    losses = logged_losses(one)
    assert len(losses) == 4  # 2 epochs of 2 steps
    assert logged_losses(sharded) == pytest.approx(losses, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("method", list(METHODS))
def test_each_method_sharded_over_two_processes_takes_the_steps_of_one(method, two, one, tiny64):
    root, done, errors = two
    out = root / method
    assert (out / "train_metrics.json").is_file(), done.stderr[-3000:]
    _same_steps(tiny64, one / method, out)
    # the periodic checkpoints in parts, each process its own (torch.distributed.checkpoint), not the whole model
    checkpoint = out / "checkpoints" / "checkpoint-2"
    for part in ("pytorch_model_fsdp_0", "optimizer_0"):
        assert sorted(p.name for p in (checkpoint / part).glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert not list(checkpoint.glob("*.safetensors")) and not list(checkpoint.glob("*.bin"))
    # the finished run whole, as one process writes it: every tensor at its full shape
    name = "adapter_model.safetensors" if method == "lora" else "model.safetensors"
    saved, expected = load_file(str(out / name)), load_file(str(one / method / name))
    assert {k: v.shape for k, v in saved.items()} == {k: v.shape for k, v in expected.items()}
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in (one / method).iterdir())


def test_a_sharded_checkpoint_resumes_to_the_uninterrupted_run(two, one, tiny64):
    root, done, errors = two
    resumed = root / "resumed"
    assert (resumed / "train_metrics.json").is_file(), done.stderr[-3000:]
    _same_steps(tiny64, one / "npo", resumed)
    difference, _ = update_difference(tiny64, root / "npo", resumed)
    assert difference <= 1e-5


def test_eval_every_under_fsdp_is_refused_in_one_line_before_training(two):
    root, done, errors = two
    refusal = [e for e in errors if "--eval-every" in e]
    assert refusal == ["error: --eval-every evaluates on the main process, which holds only a shard of the weights "
                       "under FSDP or DeepSpeed ZeRO-3; leave --eval-every out (evaluate the checkpoint with lm_eval), "
                       "or train with DDP or LoRA."]
    assert not (root / "eval_every").exists() and not (root / "eval_every.partial").exists()  # nothing trained


def test_a_nan_loss_on_one_sharded_process_stops_every_process_with_the_error(two, tiny64):
    root, done, errors = two
    assert done.returncode != 0
    nan = [e for e in errors if "loss is nan" in e]
    assert len(nan) == 1 and "The ga loss is nan on process 1 of 2 at step 1 (terms: {'forget_nll':" in nan[0]
    # only the two expected failures: every other run of the launch succeeded
    assert len(errors) == 2, done.stderr[-3000:]
    kept = root / "nan.partial" / "last_good" / "model.safetensors"  # the weights before the step, gathered whole
    base = load_file(str(tiny64 / "model.safetensors"))
    assert {k: v.shape for k, v in load_file(str(kept)).items()} == {k: v.shape for k, v in base.items()}


def test_the_sharded_run_evaluates_as_one_process_and_pushes(two, one, demo_data_dir, tmp_path, hub_standin,
                                                              monkeypatch, capsys):
    """``lm_eval --model hf`` (lm-eval in this process) gives the sharded run's saved model the one process's
    numbers, and ``unlearn push`` uploads the folder."""
    import huggingface_hub.constants as hc

    from fixtures.commands import run_unlearn_here
    from harness_ext.evaluate import run_lm_eval

    root, done, errors = two
    results = {name: run_lm_eval(folder, [TASK], tmp_path / name, {"data_dir": str(demo_data_dir)}, batch_size=2,
                                 extra_model_args={"dtype": "float64"})["results"][TASK]
               for name, folder in (("sharded", root / "graddiff"), ("one", one / "graddiff"))}
    numbers = {k: v for k, v in results["one"].items() if isinstance(v, float)}
    assert "forget_prob,none" in numbers
    assert {k: results["sharded"][k] for k in numbers} == pytest.approx(numbers, rel=1e-9, nan_ok=True)

    hub = hub_standin()
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hc, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(hc, "ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    pushed = run_unlearn_here(["push", root / "graddiff", "--repo", "me/fsdp"], capsys)
    assert pushed.returncode == 0, pushed.stderr[-3000:]
    assert hub.content("me/fsdp", "model.safetensors")[0] == (root / "graddiff" / "model.safetensors").read_bytes()


@pytest.fixture(scope="module")
def three(two, tiny64, demo_data_dir, tmp_path_factory):
    """One launch of 3 FSDP processes of 1 row (steps of 3 rows): every method for 2 epochs, and in one process with
    3 micro-batches; then :func:`two`'s 1-epoch run at 6 rows a step resumed on the 3 processes, first with another
    global batch (refused), then with the same one to 2 epochs."""
    root = tmp_path_factory.mktemp("fsdp3")
    common = [*_common(tiny64, demo_data_dir), "--epochs", "2"]
    recount = two[0] / "recount"
    commands = [["run", *options, *common, "--batch-size", "1", "--out", root / "three" / m]
                for m, options in METHODS.items()]
    commands += [["run", *METHODS["npo"], *common, *RECOUNT[2], "--resume", "--out", recount],  # 9 rows a step
                 ["run", *METHODS["npo"], *common, *RECOUNT[3], "--resume", "--out", recount]]
    with ThreadPoolExecutor(1) as pool:  # the one-process runs while the processes start and train
        launched = pool.submit(_fsdp_launch, 3, commands, {"PROBE_MEMORY": str(root / "memory.jsonl")})
        for m, options in METHODS.items():
            _one_process(["run", *options, *common, "--batch-size", "1", "--grad-accum", "3", "--out",
                          root / "one" / m])
        _one_process(["run", *METHODS["npo"], *common, *RECOUNT[1], "--out", root / "one" / "recount"])
        done = launched.result()
    errors = sorted({line for line in done.stderr.splitlines() if line.startswith("error: ")})
    return root, done, errors


@pytest.mark.parametrize("method", list(METHODS))
def test_three_sharded_processes_take_the_steps_of_one(method, three, tiny64):
    root, done, errors = three
    assert (root / "three" / method / "train_metrics.json").is_file(), done.stderr[-3000:]
    _same_steps(tiny64, root / "one" / method, root / "three" / method, processes=3)
    parts = root / "three" / method / "checkpoints" / "checkpoint-2" / "pytorch_model_fsdp_0"
    assert len(list(parts.glob("*.distcp"))) == 3


def test_the_reference_copy_is_sharded_with_the_model(three):
    """KL's and RMU's frozen reference is sharded as the trained model is: each process holds a third of it (the
    probe reports, at the end of the launch, the last run that kept a copy: RMU's)."""
    import json

    root, done, errors = three
    rows = [json.loads(line) for line in (root / "memory.jsonl").read_text().splitlines()]
    assert sorted(r["rank"] for r in rows) == [0, 1, 2]
    whole = {r["reference_whole"] for r in rows}
    assert len(whole) == 1 and sum(r["reference"] for r in rows) == whole.pop()
    assert all(r["reference"] < r["reference_whole"] / 2 for r in rows)


def test_a_sharded_checkpoint_resumes_on_another_process_count_at_the_same_global_batch(two, three, tiny64):
    """Written by 2 processes (1 row, 3 micro-batches), resumed by 3 (1 row, 2 micro-batches): torch's distributed
    checkpoint reshards the weights and AdamW's state, and the run ends in the weights of one process taking the
    same 2 steps of 6 rows. Another global batch is refused in one line before anything is loaded or written."""
    root, done, errors = three
    recount = two[0] / "recount"
    # every process refuses alike (3 processes writing the line at once may interleave their copies)
    assert (f"error: --resume: the checkpoint in {recount} was written by 2 processes with --batch-size 1 --grad-accum "
            "3, 6 rows a step; 3 processes with --batch-size 1 --grad-accum 3 would take 9. Resume on 3 processes with "
            "--batch-size and --grad-accum making 2 rows per process (e.g. --batch-size 1 --grad-accum 2), or on 2 "
            "processes.") in errors
    assert all(e.startswith("error: --resume: the checkpoint in") for e in errors), done.stderr[-3000:]
    assert (recount / "train_metrics.json").is_file(), done.stderr[-3000:]
    one = root / "one" / "recount"
    difference, update = update_difference(tiny64, one, recount)
    assert update > 1e-2 and difference <= 1e-5
    losses = logged_losses(one)
    assert len(losses) == 2  # 2 epochs of one step
    assert logged_losses(recount) == pytest.approx(losses, rel=1e-6, abs=1e-6)
    parts = recount / "checkpoints" / "checkpoint-2" / "pytorch_model_fsdp_0"
    assert len(list(parts.glob("*.distcp"))) == 3  # the second epoch's checkpoint written by the 3 processes
