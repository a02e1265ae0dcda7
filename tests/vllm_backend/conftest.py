"""The vLLM suite runs only where vLLM is importable (the optional CI stage's own virtual environment)."""

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the shared test helpers in tests/

pytest.importorskip("vllm", reason="vLLM is not installed (see .ci/vllm_stage.sh)")
# vLLM logs from its atexit shutdown hooks after pytest has closed the capture streams; don't print tracebacks for it.
logging.raiseExceptions = False
