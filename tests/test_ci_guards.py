"""The CI guards: a skip for want of something CI provides fails under CI (tests/fixtures/ci_skips.py), and a stage's
JUnit report with too few tests or any skip fails (.ci/check_junit.py)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.ci_skips import ci_active, fail_ci_provided_skip
from fixtures.scripts import load_script

REPO = Path(__file__).resolve().parents[1]
#: The skip reasons the suite produces for what CI provides (see the skips in tests/ and tests/conftest.py).
CI_PROVIDED_REASONS = [
    "../shared/data is absent", "legacy TOFU logs are absent", "../shared/data/deep_unlearning not present",
    "/ci/shared/data/deep_unlearning is absent", "could not import 'PIL': No module named 'PIL'",
    "could not import 'numba': No module named 'numba'", "numba absent",
    "could not import 'llama_models': No module named 'llama_models'",
    "llama-models / tiktoken not installed (extra [waterdrum])",
    "headless Chromium is not installed (apt-get install -y chromium): the HTML report was not rendered in a browser",
]
OTHER_REASONS = ["optional suite: run with `python -m pytest --optional` (see README, Tests)",
                 "vLLM is not installed (see .ci/vllm_stage.sh)", "SmolLM2 could not be built, real-model tests skipped"]


def _skip(reason: str, collect: bool = False):
    longrepr = ("t.py", 1, f"Skipped: {reason}")
    if collect:
        return pytest.CollectReport("t.py", "skipped", longrepr, [])
    return pytest.TestReport("t.py::t", ("t.py", 1, "t"), {}, "skipped", longrepr, "setup")


@pytest.mark.parametrize("collect", [False, True])
@pytest.mark.parametrize("reason", CI_PROVIDED_REASONS)
def test_ci_provided_skip_fails_under_ci_only(reason, collect, monkeypatch):
    monkeypatch.setenv("CI", "true")
    report = _skip(reason, collect)
    fail_ci_provided_skip(report)
    assert report.failed and "CI provides that dependency or data" in str(report.longrepr)
    monkeypatch.delenv("CI")
    report = _skip(reason, collect)
    fail_ci_provided_skip(report)
    assert report.skipped


@pytest.mark.parametrize("reason", OTHER_REASONS)
def test_other_skips_stay_skips_under_ci(reason, monkeypatch):
    monkeypatch.setenv("CI", "true")
    report = _skip(reason)
    fail_ci_provided_skip(report)
    assert report.skipped


@pytest.mark.parametrize(("value", "active"), [("true", True), ("1", True), ("", False), ("false", False), ("0", False)])
def test_ci_variable(value, active, monkeypatch):
    monkeypatch.setenv("CI", value)
    assert ci_active() is active


def test_a_module_level_skip_fails_a_ci_run(tmp_path):
    """End to end through pytest: a module skipped for a missing PIL-like import is an error with CI set."""
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(REPO / 'tests')!r})\n"
        "import pytest\nfrom fixtures.ci_skips import fail_ci_provided_skip\n\n"
        "@pytest.hookimpl(hookwrapper=True)\ndef pytest_make_collect_report(collector):\n"
        "    outcome = yield\n    fail_ci_provided_skip(outcome.get_result())\n")
    (tmp_path / "test_m.py").write_text("import pytest\npytest.skip('could not import \\'PIL\\': no', "
                                        "allow_module_level=True)\n\ndef test_x():\n    pass\n")
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    ci = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env={**env, "CI": "true"})
    local = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert ci.returncode != 0 and "CI provides that dependency" in ci.stdout
    assert local.returncode == 0 and "1 passed, 1 skipped" in local.stdout


def _check_junit():
    return load_script(REPO / ".ci" / "check_junit.py")


def _report(path: Path, tests: int, skipped: int = 0, failures: int = 0, errors: int = 0) -> str:
    path.write_text(f'<testsuites><testsuite name="pytest" tests="{tests}" skipped="{skipped}" '
                    f'failures="{failures}" errors="{errors}"></testsuite></testsuites>')
    return str(path)


def test_check_junit_requires_enough_tests_and_no_skip(tmp_path, capsys):
    main = _check_junit().main
    assert main([_report(tmp_path / "ok.xml", 10), "--min-tests", "10"]) == 0
    assert main([_report(tmp_path / "few.xml", 9), "--min-tests", "10"]) == 1
    assert "only 9 tests ran, expected at least 10" in capsys.readouterr().err
    assert main([_report(tmp_path / "skip.xml", 1, skipped=1), "--min-tests", "1"]) == 1  # vLLM absent: "1 skipped"
    assert "1 skipped" in capsys.readouterr().err
    assert main([_report(tmp_path / "fail.xml", 12, failures=1), "--min-tests", "10"]) == 1
    assert main([str(tmp_path / "missing.xml"), "--min-tests", "1"]) == 1
    assert "no readable test report" in capsys.readouterr().err


def test_check_junit_allow_skips_counts_only_tests_that_ran(tmp_path, capsys):
    main = _check_junit().main
    assert main([_report(tmp_path / "s.xml", 12, skipped=2), "--min-tests", "10", "--allow-skips"]) == 0
    assert "10 tests ran and passed, 2 skipped" in capsys.readouterr().out
    assert main([_report(tmp_path / "s.xml", 12, skipped=3), "--min-tests", "10", "--allow-skips"]) == 1
    assert "only 9 tests ran, expected at least 10" in capsys.readouterr().err
    assert main([_report(tmp_path / "f.xml", 12, skipped=1, errors=1), "--min-tests", "1", "--allow-skips"]) == 1


def test_floor_constraints_pin_every_dependency_at_its_floor(tmp_path):
    """The floor stage's constraints come from pyproject.toml alone: one ``name==floor`` per dependency."""
    import tomllib

    spec = importlib.util.spec_from_file_location("floor_constraints", REPO / ".ci" / "floor_constraints.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = module.constraints()
    assert len(lines) == len(deps) and all(line.count("==") == 1 for line in lines)
    assert {"lm-eval==0.4.13", "torch==2.4.1", "datasets==3.0.1"} <= set(lines)  # open-unlearning's torch, datasets
    assert module.floor("lm-eval>=0.4.13,<0.5") == ("lm-eval", "0.4.13")
    assert module.floor("ray[tune] >= 2.9") == ("ray", "2.9")
    for no_floor in ("numpy", "numpy<3", "numpy==2.0"):
        with pytest.raises(ValueError, match="no single '>=' floor"):
            module.floor(no_floor)
    toml = tmp_path / "pyproject.toml"
    toml.write_text('[project]\ndependencies = ["a>=1.2", "b[x]>=3,<4"]\n')
    assert module.constraints(toml) == ["a==1.2", "b==3"]
