#!/usr/bin/env bash
# Optional CI stage: the dependency floor. Every dependency at the lowest version pyproject.toml allows (constraints
# generated from it by .ci/floor_constraints.py: the floors are declared once, there), in its own virtual
# environment, then the fast tests (-m "not slow") of tests/harness_ext: the layer built on torch, transformers and
# lm-eval's internals (88 passed, 1 skipped: 341 s, the stage 403 s with a kept venv, load average 6.6 to 4.5 on the shared 2-core machine:
# the subset is kept to one folder so that .ci/run stays under 45 minutes). What fails at the floor is fixed or the
# floor raised (docs/testing.md, "Dependency floor stage"). Skip with UNLEARN_SKIP_FLOOR=1; FLOOR_TESTS="PATHS"
# runs other tests (e.g. "tests/harness_ext tests/unlearn_tasks tests/unlearn_methods").
#
# Cost: PyPI's torch 2.4.1 is a CUDA build (a 797 MB wheel plus ~2 GB of nvidia-* wheels, 5.9 GB installed; it
# imports and runs on the CPU, but not without the nvidia-* libraries). The venv is kept between runs (in the user's
# cache folder, one per set of floors), so only the first run on a machine pays the download: 927 s cold on the shared 2-core machine (load 10-13), 77 s kept (load 8-10).
# `bash .ci/floor_stage.sh install` only builds the venv, `... test` only checks and tests it (.ci/run builds it while
# the main tests run); with no argument it does both.
set -euo pipefail
mode=${1:-all}
case $mode in install|test|all) ;; *) echo "usage: bash $0 [install|test]" >&2; exit 2;; esac
cd "$(dirname "$0")/.."
if [ "${UNLEARN_SKIP_FLOOR:-0}" = "1" ]; then echo "floor stage skipped (UNLEARN_SKIP_FLOOR=1)"; exit 0; fi
start=$(date +%s)
constraints=$(mktemp -d)/floor-constraints.txt
python .ci/floor_constraints.py > "$constraints"
# The venv is kept outside the checkout, one per set of floors (the constraints' hash), so a fresh clone on the same
# machine reuses it: every package in it is pinned to its floor, so reusing it changes nothing that is tested.
venv=${FLOOR_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lm-eval-unlearning/venv-floor-$(sha256sum "$constraints" | cut -c1-12)}
if [ "$mode" != test ]; then
  [ -x "$venv/bin/python" ] || python -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$constraints" -e . pytest pytest-timeout rouge==1.0.1
  "$venv/bin/python" -m pip check
  echo "floor stage install: $(( $(date +%s) - start )) s"
fi
[ "$mode" = install ] && exit 0
"$venv/bin/python" - "$constraints" <<'EOF'
import sys
from importlib.metadata import version
from packaging.version import Version
pins = [line.strip().split("==") for line in open(sys.argv[1]) if "==" in line]
wrong = [f"{name} {version(name)} (floor {floor})" for name, floor in pins if Version(version(name)) != Version(floor)]
if wrong:
    sys.exit("floor stage: not at the floor: " + ", ".join(wrong))
print("at the floor:", ", ".join(f"{name} {floor}" for name, floor in pins))
EOF
# PASSIVE: it runs beside the main tests (.ci/run), where spinning OpenMP threads would hold the cores both need
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_WAIT_POLICY=PASSIVE
report=$(mktemp -d)/floor_junit.xml
# shellcheck disable=SC2086
"$venv/bin/python" -m pytest -q -m "not slow" ${FLOOR_TESTS:-tests/harness_ext} \
  --junitxml="$report" || true
# Skips are allowed here (optional extras such as numba or Chromium are not installed at the floor); failures are not.
"$venv/bin/python" .ci/check_junit.py "$report" --min-tests "${FLOOR_MIN_TESTS:-80}" --allow-skips
echo "floor stage total: $(( $(date +%s) - start )) s"
