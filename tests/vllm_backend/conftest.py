"""The vLLM suite runs only where vLLM is importable (the optional CI stage's own virtual environment). In that
stage (UNLEARN_REQUIRE_VLLM=1, set by .ci/vllm_stage.sh) a vLLM that does not import is an error, not a skip."""

import logging
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the shared test helpers in tests/

if os.environ.get("UNLEARN_REQUIRE_VLLM") == "1":
    import vllm  # noqa: F401  (an ImportError here fails the stage)
else:
    pytest.importorskip("vllm", reason="vLLM is not installed (see .ci/vllm_stage.sh)")
# vLLM logs from its atexit shutdown hooks after pytest has closed the capture streams; don't print tracebacks for it.
logging.raiseExceptions = False
