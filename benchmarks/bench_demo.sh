#!/usr/bin/env bash
# Wall time of `unlearn demo` alone (corpus, fine-tunings, unlearning runs, every evaluation), with the machine,
# the date and the load average before and after (a load above the core count means other work shared the CPU,
# so the figure is an upper bound).
#   bash benchmarks/bench_demo.sh [extra `unlearn demo` options]
set -euo pipefail
cd "$(dirname "$0")/.."
workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT
echo "machine: $(uname -n) $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 python -m unlearn_app demo --workdir "$workdir/demo" --quiet "$@" > "$workdir/log" 2>&1 \
  || { tail -30 "$workdir/log"; exit 1; }
end=$(date +%s.%N)
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'unlearn demo: %.0f s wall\n' "$(echo "$end - $start" | bc)"
