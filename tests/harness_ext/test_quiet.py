"""Issue 29: torch / torchao start-up messages that say nothing to the user are filtered where they are logged."""

import logging
import subprocess
import sys

import pytest

from harness_ext.quiet import silence

IMPORTS = "import transformers, peft\nfrom torchao.quantization.quant_primitives import choose_qparams_affine\n"


def test_exactly_the_two_noise_messages_are_dropped(caplog):
    silence()
    silence()  # idempotent
    assert sum(type(f).__name__ == "_DropNoise" for f in logging.getLogger("torchao").filters) == 1
    with caplog.at_level(logging.WARNING):
        logging.getLogger("torchao").warning("Failed to load /x/_C_cutlass_90a.abi3.so: Could not load this library")
        logging.getLogger("torch.utils._pytree").warning("%s is an Enum subclass and is now natively supported by "
                                                         "torch.compile", "<enum 'KernelPreference'>")
        logging.getLogger("torchao").warning("a real torchao warning")
        logging.getLogger("torch.utils._pytree").warning("another pytree message")
    assert [r.getMessage() for r in caplog.records] == ["a real torchao warning", "another pytree message"]


def test_unlearn_imports_torchao_quietly():
    pytest.importorskip("torchao")
    quiet = subprocess.run([sys.executable, "-c", "import unlearn_app\n" + IMPORTS], capture_output=True, text=True,
                           timeout=300)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "Failed to load" not in quiet.stderr and "Enum subclass" not in quiet.stderr, quiet.stderr[-2000:]
