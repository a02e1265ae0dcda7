"""``accelerate launch --cpu --num_processes N``, which accelerate runs as one process, runs `unlearn` in N processes
(:mod:`unlearn_app.launch`): a run on 2 CPU processes with ``--batch-size 1`` ends in the weights and logs the losses
of one process with ``--batch-size 2``. The runs are the issue's command on the tests' tiny model and TOFU-layout
folder, shortened to forget01 and one epoch (3 steps); the answers differ in length, so a step normalised per
process (each process's mean over its own tokens) instead of over the global batch ends in other weights, and a
share of the global count not divided among the processes logs other losses."""

from __future__ import annotations

import pytest

from fixtures.commands import launch, run_unlearn_here
from fixtures.weights import assert_same_losses, logged_losses, update_difference
from unlearn_app.launch import cpu_processes_asked, launch_command, launcher_arguments

LAUNCHED = {"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@pytest.mark.parametrize("cmdline, options", [
    (["/env/bin/python3.11", "/env/bin/accelerate", "launch", "--cpu", "-m", "unlearn_app"], ["--cpu", "-m", "unlearn_app"]),
    (["/env/bin/accelerate-launch", "--num_processes", "2", "x.py"], ["--num_processes", "2", "x.py"]),
    (["python", "-m", "accelerate.commands.launch", "--cpu"], ["--cpu"]),
    (["python", "-m", "accelerate.commands.accelerate_cli", "launch", "--cpu"], ["--cpu"]),
    (["/env/bin/accelerate", "config"], None),
    (["bash", "-c", "unlearn run"], None),
    ([], None),
])
def test_the_options_of_an_accelerate_launch_command_line(cmdline, options):
    assert launcher_arguments(cmdline) == options


@pytest.mark.parametrize("env, launcher, asked", [
    (LAUNCHED, "--cpu --num_processes 2", 2),
    (LAUNCHED, "--cpu --num_processes=3 --main_process_port 29611", 3),
    (LAUNCHED, "--cpu --num_processes 1", None),
    (LAUNCHED, "--cpu", None),
    (LAUNCHED, "--num_processes 2", None),  # not --cpu: accelerate chose the launcher
    (LAUNCHED, "--cpu --num_processes 4 --num_machines 2 --main_process_ip 10.0.0.1", None),
    (LAUNCHED, "--cpu --num_processes 4 --mpirun_hostfile hosts", None),  # mpirun starts them
    ({**LAUNCHED, "WORLD_SIZE": "2", "RANK": "0"}, "--cpu --num_processes 2", None),  # already one of several
    ({**LAUNCHED, "ACCELERATE_USE_CPU": "False"}, "--cpu --num_processes 2", None),
    ({"ACCELERATE_USE_CPU": "True"}, "--cpu --num_processes 2", None),  # no MASTER_ADDR: not for several
])
def test_one_process_of_a_cpu_launch_asking_for_several_is_recognised(env, launcher, asked):
    parent = ["/env/bin/python", "/env/bin/accelerate", "launch", *launcher.split(), "-m", "unlearn_app", "run"]
    assert cpu_processes_asked(env, parent) == asked
    assert cpu_processes_asked(env, ["bash", "-c", "unlearn run"]) is None


def test_the_launch_command_is_accelerates_multi_process_launcher():
    command = launch_command(3, 29611, ["run", "--method", "npo"], mixed_precision="bf16", threads=2)
    assert command[1:] == ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "3",
                           "--num_machines", "1", "--mixed_precision", "bf16", "--dynamo_backend", "no",
                           "--main_process_port", "29611", "--num_cpu_threads_per_process", "2", "-m", "unlearn_app",
                           "run", "--method", "npo"]


class Replaced(Exception):
    """Raised by the stand-in for ``os.execve``: the process would have been replaced by the N processes."""


@pytest.fixture
def one_of_a_cpu_launch(monkeypatch):
    """This process as the one ``accelerate launch --cpu --num_processes 2 --main_process_port 29611`` starts (a port
    other than accelerate's default 29500): the environment and parent command line it sees, and ``os.execve``
    recorded instead of run. Yields the recorded ``(command, environment)`` of each re-exec."""
    from unlearn_app import launch as launch_module

    port = "29611"
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {**LAUNCHED, "MASTER_PORT": port}.items():
        monkeypatch.setenv(name, value)
    parent = ["/env/bin/python", "/env/bin/accelerate", "launch", "--cpu", "--num_processes", "2",
              "--main_process_port", port, "-m", "unlearn_app", "run"]
    monkeypatch.setattr(launch_module, "_parent_cmdline", lambda: parent)
    execs = []

    def execve(executable, command, env):
        execs.append((command, env))
        raise Replaced

    monkeypatch.setattr(launch_module.os, "execve", execve)
    return execs


def _run_argv(out, *extra):
    """`unlearn run` of a Hub id's model (never loaded: the process is replaced, or refused, before)."""
    return ["run", "--method", "npo", "--model", "org/model", "--data", "demo", "--forget", "forget01", *extra,
            "--out", str(out)]


def test_the_re_exec_passes_the_launchers_port_and_the_command_on(one_of_a_cpu_launch, tmp_path, capsys):
    from unlearn_app.cli import main

    argv = _run_argv(tmp_path / "o", "--param", "beta=0.2")
    with pytest.raises(Replaced):
        main(argv)
    [(command, env)] = one_of_a_cpu_launch
    at = command.index("--main_process_port")
    assert command[at + 1] == "29611" and env["MASTER_PORT"] == "29611" and env["ACCELERATE_USE_CPU"] == "true"
    assert command[command.index("--num_processes") + 1] == "2" and command[-len(argv):] == argv
    assert capsys.readouterr().err.count("accelerate launch --cpu started one process") == 1


@pytest.mark.parametrize("options, message", [
    (["--param", "beta=0.1;x"], "error: Method 'npo': parameter beta='0.1;x' is not allowed; expected float.\n"),
    (["--epochs", "x"], "unlearn run: error: argument --epochs: must be a number, got 'x'\n"),  # argparse's own
    (["--data", "no such data"], "error: --data 'no such data' is neither a data source's name"),
])
def test_a_bad_option_is_refused_once_before_the_processes_start(options, message, one_of_a_cpu_launch, tmp_path,
                                                                  capsys):
    """Refused by the one process accelerate started, in one line (argparse: its usage, then its line), and no
    process started: accelerate's launcher then reports the failed command (docs/scaling.md)."""
    run = run_unlearn_here(_run_argv(tmp_path / "o", *options), capsys)
    assert run.returncode == 2 and one_of_a_cpu_launch == []
    assert message in run.stderr and run.stderr.count("error:") == 1 and "started one process" not in run.stderr
    assert not (tmp_path / "o").exists()


def test_a_bad_margins_option_is_refused_once_before_the_processes_start(one_of_a_cpu_launch, tmp_path, capsys):
    """``unlearn margins`` declares its checks for the launch too: a missing data file, a model that is not there and
    an adapter without its base are refused by the one process, no process started; good options start them."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "a", "target": "b"}\n')
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"r": 8}')
    out = ["--out", str(tmp_path / "m.npy")]
    for argv, message in [(["--model", "org/model", "--data", str(tmp_path / "none.jsonl")], "none.jsonl does not exist"),
                          (["--model", str(tmp_path / "nowhere"), "--data", str(data)], "nowhere"),
                          (["--model", str(adapter), "--data", str(data)], "names no base_model_name_or_path")]:
        run = run_unlearn_here(["margins", *argv, *out], capsys)
        assert run.returncode == 2 and one_of_a_cpu_launch == [], run.stderr
        assert message in run.stderr and run.stderr.count("error:") == 1 and "started one process" not in run.stderr
    with pytest.raises(Replaced):
        run_unlearn_here(["margins", "--model", "org/model", "--data", str(data), *out], capsys)
    assert len(one_of_a_cpu_launch) == 1 and not (tmp_path / "m.npy").exists()


@pytest.fixture(scope="module")
def tofu_home(tmp_path_factory):
    """A ``$UNLEARN_DATA_DIR`` holding the demo corpus as a local copy of ``locuslab/TOFU``."""
    from unlearn_methods.scaffolding.tofu_corpus import write_corpus

    home = tmp_path_factory.mktemp("unlearn_data")
    write_corpus(home / "locuslab" / "TOFU")
    return home


def _one_and_launched(method: str, options: list[str], processes: int, model, tofu_home, tmp_path, monkeypatch,
                      capsys) -> tuple[float, list[float], list[float]]:
    """The issue's two commands with ``options`` (forget01, one epoch): one process with ``processes`` rows a step,
    and ``accelerate launch --cpu --num_processes PROCESSES`` with one row per process. Returns the
    :func:`update_difference` of the two (the one process's update checked to be large) and the losses each
    logged."""
    monkeypatch.setenv("UNLEARN_DATA_DIR", str(tofu_home))
    args = ["run", "--method", method, "--model", str(model), "--data", "tofu", "--forget", "forget01", *options,
            "--epochs", "1", "--lr", "1e-3", "--seed", "5", "--max-length", "64", "--quiet"]
    one = run_unlearn_here([*args, "--batch-size", str(processes), "--out", tmp_path / "one"], capsys)
    assert one.returncode == 0, one.stderr[-3000:]
    two = launch(["unlearn", *args, "--batch-size", "1", "--out", str(tmp_path / "two")], processes=processes,
                 cpu=True)
    assert two.returncode == 0, two.stderr[-3000:]
    assert f"accelerate launch --cpu started one process for --num_processes {processes}" in two.stderr
    difference, update = update_difference(model, tmp_path / "one", tmp_path / "two")
    assert update > 1e-2  # the run moved the weights
    return difference, logged_losses(tmp_path / "one"), logged_losses(tmp_path / "two")


@pytest.mark.parametrize("method", ["graddiff", "npo"])  # paired retain rows; and a reference model
def test_accelerate_launch_cpu_on_two_processes_trains_as_one(method, tiny_model_dir, tofu_home, tmp_path,
                                                           monkeypatch, capsys):
    difference, one, two = _one_and_launched(method, ["--full"], 2, tiny_model_dir, tofu_home, tmp_path,
                                             monkeypatch, capsys)
    assert difference <= 1e-4
    assert len(one) == 3  # 6 forget items, 2 a step
    assert_same_losses(tmp_path / "one", tmp_path / "two", rel=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["graddiff", "npo"])
@pytest.mark.parametrize("options, processes, steps", [
    (["--lora"], 2, 3),  # the adapter's update, B @ A
    (["--full", "--grad-accum", "2"], 2, 2),  # both sides accumulate 2 micro-batches: steps of 4 rows, then 2 and
    # two filler rows
    (["--full"], 3, 2),  # three processes, steps of 3 rows
])
def test_accelerate_launch_cpu_trains_as_one_with_lora_accumulation_and_three_processes(
        method, options, processes, steps, tiny_model_dir, tofu_home, tmp_path, monkeypatch, capsys):
    difference, one, two = _one_and_launched(method, options, processes, tiny_model_dir, tofu_home, tmp_path,
                                             monkeypatch, capsys)
    assert difference <= 1e-4
    assert len(one) == steps
    assert_same_losses(tmp_path / "one", tmp_path / "two", rel=1e-4)
