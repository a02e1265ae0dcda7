#!/usr/bin/env bash
# GPU check: the TOFU evaluation on lm-eval's hf and vLLM backends, a short NPO `unlearn run`, and decoding tokens
# per second next to the GPU's memory-bandwidth bound and the CPU figures (benchmarks/gpu_check_cpu.json). Under
# 8 minutes on one H100/H200-class GPU; nothing is downloaded. From the repository root:
#
#   bash benchmarks/gpu_check.sh [--skip-vllm] [--dtype bfloat16] [--batch-size 32] [--model DIR]
#   bash benchmarks/gpu_check.sh --dry-run     # the steps and their commands; runs nothing, needs no GPU
#   bash benchmarks/gpu_check.sh --prepare     # where PyPI is reachable: .gpu_check/load1..N for a bare GPU machine
#   bash benchmarks/gpu_check.sh --receive     # on the GPU machine: keep the loads carried so far, run nothing
#
# The bound: a decoding step reads every weight once from GPU memory, so a batch of n rows decodes at most
# n x B / W tokens a second, B the GPU's published peak memory bandwidth (a table in gpu_check.py keyed by
# nvidia-smi's name; an unknown GPU gets no bound), W the bytes of the model's weights in the run's dtype.
# benchmarks/gpu_check.py's docstring says what each step runs and how tokens and seconds are counted.
#
# On this workplace's device tool (64 MiB per call, a bare PyTorch image without lm-eval or vLLM), after
# `bash benchmarks/gpu_check.sh --prepare` here: one call per load, back to back (the machine stays warm 30 s):
#   run(command="bash benchmarks/gpu_check.sh --receive", carry=[".gpu_check/load1"], timeout_s=120)
#   run(command="bash benchmarks/gpu_check.sh --receive", carry=[".gpu_check/load2"], timeout_s=120)
#   run(command="bash benchmarks/gpu_check.sh --skip-vllm", carry=[".gpu_check/load3"], timeout_s=600)
# (docs/testing.md, "The GPU check"). Exit status: 0 done, 1 a step failed, 2 no GPU or a missing input.
set -euo pipefail
for arg in "$@"; do
  case "$arg" in --dry-run|--prepare|-h|--help) exec "${PYTHON:-python3}" "$(dirname "$0")/gpu_check.py" "$@" ;; esac
done
if ! command -v nvidia-smi >/dev/null 2>&1 || [[ -z "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)" ]]; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi is missing or lists none); run it on a GPU machine, or pass --dry-run to see its steps" >&2
  exit 2
fi
exec "${PYTHON:-python3}" "$(dirname "$0")/gpu_check.py" "$@"
