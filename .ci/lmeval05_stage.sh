#!/usr/bin/env bash
# CI stage: lm-eval's 0.5 line. A venv of its own with this package and ../shared/wheels' lm-eval 0.5.0.dev1 (built
# unchanged from upstream's tag v0.5.0.dev1), installed as a user trying 0.5 today would (docs/testing.md, "lm-eval
# 0.5"): the package first (it pulls the pinned lm-eval 0.4.13 and the other dependencies), then the 0.5 wheel over
# it (pip replaces 0.4.13 and warns that the pin `<0.5` is not met). Then the lm-eval-facing tests of
# tests/lm_eval_lines there: the same numbers on both lines (this venv's 0.5 against the Python given as
# UNLEARN_OTHER_LM_EVAL_PYTHON, CI's main venv with 0.4.13; both run side by side), the samples readers on both
# lines' files, our registered names against 0.5's built-ins; and tests/test_architecture.py.
# Skip with UNLEARN_SKIP_LMEVAL05=1. `bash .ci/lmeval05_stage.sh install` only builds the venv, `... test` only runs
# the tests (.ci/run builds it while the main tests run); with no argument it does both.
set -euo pipefail
mode=${1:-all}
case $mode in install|test|all) ;; *) echo "usage: bash $0 [install|test]" >&2; exit 2;; esac
cd "$(dirname "$0")/.."
if [ "${UNLEARN_SKIP_LMEVAL05:-0}" = "1" ]; then echo "lm-eval 0.5 stage skipped (UNLEARN_SKIP_LMEVAL05=1)"; exit 0; fi
start=$(date +%s)
venv=${LMEVAL05_VENV:-.venv-lmeval05}
wheel=${LMEVAL05_WHEEL:-../shared/wheels/lm_eval-0.5.0.dev1-py3-none-any.whl}
if [ "$mode" != test ]; then
  [ -f "$wheel" ] || { echo "lm-eval 0.5 stage: $wheel is absent" >&2; exit 1; }
  [ -x "$venv/bin/python" ] || python -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e . pytest pytest-timeout
  # pip's resolver says here that lm-eval-unlearning asks lm-eval<0.5 (and exits 0): that is the point of the stage
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel"
  echo "lm-eval 0.5 stage install: $(( $(date +%s) - start )) s"
fi
[ "$mode" = install ] && exit 0
"$venv/bin/python" - <<'EOF'
from importlib.metadata import version
got = version("lm_eval")
assert got.startswith("0.5."), f"the lm-eval 0.5 stage's venv has lm-eval {got}"
print("lm-eval", got)
EOF
other=${UNLEARN_OTHER_LM_EVAL_PYTHON:-python}
"$other" -c 'from importlib.metadata import version; v = version("lm_eval"); assert v.startswith("0.4."), v'
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_WAIT_POLICY=PASSIVE
export UNLEARN_OTHER_LM_EVAL_PYTHON="$other"
report=$(mktemp -d)/lmeval05_junit.xml
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/lm_eval_lines tests/test_architecture.py \
  --junitxml="$report" || true
# Every test must run here (no skip: the comparison needs both lines, and this stage has them).
"$venv/bin/python" .ci/check_junit.py "$report" --min-tests "${LMEVAL05_MIN_TESTS:-18}"
echo "lm-eval 0.5 stage total: $(( $(date +%s) - start )) s"
