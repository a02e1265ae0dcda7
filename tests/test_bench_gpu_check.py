"""The GPU check's plumbing (benchmarks/gpu_check.sh and gpu_check.py), on a machine without a GPU: the refusal, the
bandwidth bound by value, the GPU table, the loads a bare GPU machine receives, and that every step it would run
names tasks, backends and `unlearn run` options that exist."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fixtures.scripts import load_script

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_check.sh"


@pytest.fixture(scope="module")
def check():
    return load_script(REPO / "benchmarks" / "gpu_check.py")


def _script(args: list[str], path: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Run the shell script with ``PATH`` = ``path`` and ``PYTHON`` a stand-in that records that it was started."""
    marker = tmp_path / "python_started"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ntouch {marker}\n")
    python.chmod(0o755)
    proc = subprocess.run([shutil.which("bash"), str(SCRIPT), *args], capture_output=True, text=True,
                          env={"PATH": path, "PYTHON": str(python)})
    return proc, marker


@pytest.mark.parametrize("nvidia_smi", [None, "#!/bin/sh\nexit 0\n", "#!/bin/sh\necho 'No devices were found' >&2\nexit 6\n"])
def test_refuses_a_machine_without_a_gpu_in_one_line_before_python(check, tmp_path, nvidia_smi) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if nvidia_smi:  # present but listing no GPU
        (bin_dir / "nvidia-smi").write_text(nvidia_smi)
        (bin_dir / "nvidia-smi").chmod(0o755)
    proc, marker = _script([], str(bin_dir), tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == "" and proc.stderr == f"gpu_check: {check.NO_GPU}\n"
    assert not marker.exists()  # refused before Python started


def test_the_helper_refuses_too(check, monkeypatch, capsys) -> None:
    monkeypatch.setattr(check, "gpu_names", lambda: [])
    with pytest.raises(SystemExit) as stop:
        check.main([])
    assert stop.value.code == 2
    assert capsys.readouterr().err == f"gpu_check: {check.NO_GPU}\n"


def test_a_listed_gpu_lets_the_script_start_python(tmp_path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA H200'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    proc, marker = _script(["--skip-vllm"], f"{bin_dir}:/usr/bin:/bin", tmp_path)
    assert proc.returncode == 0 and marker.exists()


def test_decode_bound_by_value(check) -> None:
    # H200, 4.8 TB/s; SmolLM2-135M in bfloat16: 134,515,008 parameters x 2 bytes = 269,030,016 bytes.
    # 4.8e12 / 269,030,016 = 17,841.88 steps a second; at batch 32, 570,940.0 tokens a second.
    assert check.decode_bound(4.8e12, 269_030_016, 1) == pytest.approx(17_841.88, abs=0.01)
    assert check.decode_bound(4.8e12, 269_030_016, 32) == pytest.approx(570_940.0, abs=0.1)
    # Llama-3.2-1B's shape in bfloat16 (2,471,628,800 bytes) on an H100 SXM (3.35 TB/s), batch 68: 92,165.9.
    assert check.decode_bound(3.35e12, 2_471_628_800, 68) == pytest.approx(92_165.9, abs=0.1)
    with pytest.raises(ValueError, match="positive"):
        check.decode_bound(4.8e12, 0, 32)


def test_weight_bytes_count_each_parameter_once(check) -> None:
    from transformers import LlamaConfig

    smollm2 = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                          num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True)
    # embeddings 49,152 x 576 = 28,311,552 (tied: the output layer is the same tensor); per layer q and o
    # 576 x 576, k and v 576 x 192, MLP 3 x 576 x 1,536, two norms of 576: 3,540,096; 30 layers; the final norm.
    params = 28_311_552 + 30 * 3_540_096 + 576
    assert params == 134_515_008
    assert check.weight_bytes(smollm2, "bfloat16") == 2 * params
    assert check.weight_bytes(smollm2, "float32") == 4 * params
    # Llama-3.2-1B: embeddings 128,256 x 2,048 (tied); per layer 2 x 2,048^2 + 2 x 2,048 x 512 + 3 x 2,048 x 8,192
    # + 2 x 2,048 = 60,821,504; 16 layers; the final norm: 1,235,814,400 parameters.
    assert check.weight_bytes(LlamaConfig(**check.LLAMA3_1B), "bfloat16") == 2 * 1_235_814_400


@pytest.mark.parametrize("name,label,bandwidth", [
    ("NVIDIA H200", "H200", 4.8e12),
    ("NVIDIA H200 NVL", "H200", 4.8e12),
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 3.35e12),
    ("NVIDIA H100 PCIe", "H100 PCIe", 2.0e12),
    ("NVIDIA H100 NVL", "H100 NVL", 3.9e12),
    ("NVIDIA A100-SXM4-40GB", "A100 40 GB", 1.555e12),
    ("NVIDIA A100-PCIE-40GB", "A100 40 GB", 1.555e12),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM 80 GB", 2.039e12),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80 GB", 1.935e12),
    ("NVIDIA L40S", "L40S", 864e9),
    ("NVIDIA L4", "L4", 300e9),
    ("NVIDIA A10G", "A10G", 600e9),
])
def test_gpu_table_lookup(check, name, label, bandwidth) -> None:
    found, value = check.lookup_gpu(name)
    assert found.startswith(label) and value == bandwidth


@pytest.mark.parametrize("name", ["Tesla T4", "NVIDIA GH200 480GB", "NVIDIA GeForce RTX 4090", ""])
def test_unknown_gpu_gets_no_bound(check, name) -> None:
    assert check.lookup_gpu(name) is None
    step = check.Step("smollm2-hf", (), "eval", backend="hf")
    line = check.report_line("smollm2-hf", {"wall_s": 10.0, "generation_s": 2.0, "tokens": 1000, "texts": 68,
                                            "weight_bytes": 269_030_016}, step, None, 32, {})
    assert "bound: unknown GPU" in line and "of it" not in line and "vs CPU: no CPU figure" in line


def test_report_line_by_value(check) -> None:
    cpu = {"smollm2-hf": {"backend": "hf", "wall_s": 118.4, "tokens_per_s": 99.4}}
    result = {"wall_s": 20.0, "generation_s": 4.0, "tokens": 4000, "texts": 68, "weight_bytes": 269_030_016}
    hf = check.report_line("smollm2-hf", result, check.Step("smollm2-hf", (), "eval", backend="hf"),
                           ("H200", 4.8e12), 32, cpu)
    # 4000 / 4 = 1000 tok/s; bound at batch 32 570,940 tok/s: 0.18% of it; 1000 / 99.4 = 10.1x; 118.4 / 20 = 5.9x
    assert "1000.0 tok/s" in hf and "bound     570940 tok/s (batch 32, 269 MB of weights)" in hf
    assert "0.18% of it" in hf and "10.1x tok/s" in hf and "5.9x faster wall" in hf
    vllm = check.report_line("smollm2-vllm", result, check.Step("smollm2-vllm", (), "eval", backend="vllm"),
                             ("H200", 4.8e12), 32, cpu)
    # vLLM's batch is every generation request at once (68): bound 1,213,247 tok/s; compared with the CPU hf figure
    assert "bound    1213248 tok/s (batch 68" in vllm and "(hf 118.4 s, 99.4 tok/s)" in vllm
    npo = check.report_line("smollm2-npo", {"wall_s": 30.0}, check.Step("smollm2-npo", (), "unlearn"), None, 32,
                            {"smollm2-npo": {"wall_s": 600.0}})
    assert "20.0x faster wall (CPU 600.0 s)" in npo
    loaded = check.report_line("smollm2-npo", {"wall_s": 30.0}, check.Step("smollm2-npo", (), "unlearn"), None, 32,
                               {"smollm2-npo": {"wall_s": 600.0, "loaded": True}})
    assert "(CPU 600.0 s, loaded: an upper bound)" in loaded


def _args(check, *extra: str) -> argparse.Namespace:
    return check.parser().parse_args(["--work", "/w", *extra])


def test_every_step_names_what_exists(check) -> None:
    from harness_ext.task_index import unknown_tasks
    from unlearn_app.cli import build_parser
    from unlearn_tasks.tofu.options import TofuOptions

    steps = check.plan(_args(check), "/w/smollm2", "/w/llama3", "/w/data")
    assert [s.name for s in steps] == ["smollm2-hf", "smollm2-vllm", "llama3-1b-hf", "llama3-1b-vllm", "smollm2-npo"]
    evals = [s for s in steps if s.kind == "eval"]
    assert unknown_tasks(sorted({s.task for s in evals})) == []
    tofu_keys = {f.name for f in dataclasses.fields(TofuOptions)}
    for step in evals:
        assert set(step.options) <= tofu_keys, step.options
        parsed = check.parser().parse_args(list(step.argv[1:]))  # the step's own command line, as its process reads it
        assert (parsed.step, parsed.backend, parsed.task, parsed.model) == ("eval", step.backend, step.task, step.model)
        assert json.loads(parsed.metadata) == step.options
    npo = steps[-1]
    assert npo.argv[:3] == ("-m", "unlearn_app", "run")
    run = build_parser("run").parse_args(list(npo.argv[2:]))  # argparse exits on an unknown option
    assert (run.method, run.model, run.data, run.forget, run.lora, run.epochs, run.batch_size, run.dtype) == (
        "npo", "/w/smollm2", "demo", "forget10", False, 2, 8, "bfloat16")
    assert [s.name for s in check.plan(_args(check, "--skip-vllm"), "m", "l", "d")] == [
        "smollm2-hf", "llama3-1b-hf", "smollm2-npo"]


def test_backends_are_lm_evals(check) -> None:
    import lm_eval.models  # noqa: F401  (registers the backends)
    from lm_eval.api.registry import MODEL_REGISTRY

    assert {"hf", "vllm"} <= set(MODEL_REGISTRY)


def test_dry_run_lists_the_steps_without_a_gpu(tmp_path) -> None:
    proc = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--skip-vllm", "--work", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("gpu_check --dry-run") and len(lines) == 4
    assert lines[3].startswith("  smollm2-npo: python -m unlearn_app run --method npo")


def test_loads_pack_and_receive(check, tmp_path) -> None:
    files = []
    for name, size in (("a.whl", 30), ("b.whl", 50)):
        files.append(tmp_path / name)
        files[-1].write_bytes(bytes([len(files)]) * size)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(bytes(range(250)))
    folders = check.pack(files, gguf, tmp_path / "loads", load_bytes=100)
    # a.whl + b.whl (80 bytes) + 20 bytes of the GGUF file; then 100, 100 and 30 bytes of it
    assert [f.name for f in folders] == ["load1", "load2", "load3", "load4"]
    sizes = [sum(p.stat().st_size for p in f.iterdir() if p.name != check.MANIFEST) for f in folders]
    assert sizes == [100, 100, 100, 30]
    stage = tmp_path / "stage"
    only_first = tmp_path / "carried"
    shutil.copytree(folders[0], only_first / "load1")
    manifest, missing = check.receive(only_first, stage)
    assert manifest["loads"] == 4 and missing == [2, 3, 4]
    manifest, missing = check.receive(tmp_path / "loads", stage)
    assert missing == []
    assert b"".join((stage / p).read_bytes() for p in manifest["gguf_parts"]) == gguf.read_bytes()
    assert check.receive(tmp_path / "nothing", tmp_path / "empty") == (None, [])


def test_a_damaged_load_is_refused(check, tmp_path, capsys) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"x" * 10)
    (folder,) = check.pack([], gguf, tmp_path / "loads", load_bytes=100)
    (folder / f"{check.GGUF_NAME}.part01").write_bytes(b"y" * 10)
    with pytest.raises(SystemExit) as stop:
        check.receive(tmp_path / "loads", tmp_path / "stage")
    assert stop.value.code == 2 and "missing or damaged" in capsys.readouterr().err


def test_cpu_figures_say_when_and_where(check) -> None:
    steps = json.loads(check.CPU_FIGURES.read_text())["steps"]
    assert set(steps) <= {"smollm2-hf", "smollm2-vllm", "llama3-1b-hf", "llama3-1b-vllm", "smollm2-npo"}
    for name, figure in steps.items():
        assert figure["date"] and figure["machine"] and figure["setting"] and figure["wall_s"] > 0, name
        if "tokens" in figure:
            assert figure["tokens_per_s"] == pytest.approx(figure["tokens"] / figure["generation_s"], abs=0.05)


def test_device_commands_in_the_header_parse(check) -> None:
    header = [line for line in SCRIPT.read_text().splitlines() if line.startswith("#   run(command=")]
    assert len(header) == 3
    for line in header:
        command = line.split('"')[1]
        assert command.startswith("bash benchmarks/gpu_check.sh")
        check.parser().parse_args(command.split()[2:])


def _fake_child(ran: list):
    def child(argv, args, timeout=600):
        ran.append(list(argv))
        if "--json" in argv:  # an evaluation step writes its result where the check reads it
            Path(argv[argv.index("--json") + 1]).write_text(json.dumps({
                "evaluation_s": 5.0, "generation_s": 2.0, "texts": 68, "tokens": 1000, "weight_bytes": 269_030_016,
                "metrics": {}}))
        return 10.0
    return child


def test_the_check_runs_its_steps_and_reports(check, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(check, "gpu_names", lambda: ["NVIDIA H200"])
    monkeypatch.setattr(check, "_stage_models", lambda args, stage, manifest: ("/m/smollm2", "/m/llama3"))
    ran: list = []
    monkeypatch.setattr(check, "_child", _fake_child(ran))
    check.main(["--skip-vllm", "--work", str(tmp_path), "--loads", str(tmp_path / "no-loads")])
    out = capsys.readouterr().out.splitlines()
    assert "GPU: NVIDIA H200 = H200 (141 GB HBM3e), 4.80 TB/s peak; dtype bfloat16, hf batch 32" in out[0]
    assert ran[0][:2] == ["-c", ran[0][1]] and "write_corpus" in ran[0][1]  # the demo corpus first
    assert [a[a.index("--backend") + 1] if "--backend" in a else a[2] for a in ran[1:]] == ["hf", "hf", "run"]
    rows = {line.split()[0]: line for line in out if line.split() and line.split()[0] in
            {"smollm2-hf", "llama3-1b-hf", "smollm2-npo"}}
    # 1000 tokens in 2 s = 500 tok/s; bound 570,940 at batch 32 (0.09% of it); 500 / 99.4 = 5.0x; 118.4 / 10 = 11.8x
    assert "500.0 tok/s" in rows["smollm2-hf"] and "0.09% of it" in rows["smollm2-hf"]
    assert "5.0x tok/s" in rows["smollm2-hf"] and "11.8x faster wall" in rows["smollm2-hf"]
    assert "vs CPU: no CPU figure" in rows["llama3-1b-hf"]
    assert "251.7x faster wall (CPU 2516.6 s, loaded: an upper bound)" in rows["smollm2-npo"]
    assert out[-1] == "total 0 s"


def test_the_check_stops_without_vllm_unless_told(check, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(check, "gpu_names", lambda: ["NVIDIA H100 80GB HBM3"])
    monkeypatch.setattr(check, "has_module", lambda name, args: False)
    monkeypatch.setattr(check, "_child", _fake_child([]))
    with pytest.raises(SystemExit) as stop:
        check.main(["--work", str(tmp_path), "--loads", str(tmp_path / "no-loads")])
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        "gpu_check: vLLM is not installed here: install it (pip install vllm) or pass --skip-vllm\n")


def test_a_missing_load_stops_the_check(check, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(check, "gpu_names", lambda: ["NVIDIA H200"])
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"z" * 150)
    check.pack([], gguf, tmp_path / "loads", load_bytes=100)
    shutil.rmtree(tmp_path / "loads" / "load2")
    with pytest.raises(SystemExit) as stop:
        check.main(["--skip-vllm", "--work", str(tmp_path / "work"), "--loads", str(tmp_path / "loads")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("gpu_check: load 2 of 2 not received") and err.count("\n") == 1
