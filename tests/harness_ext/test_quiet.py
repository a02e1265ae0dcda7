"""Issue 29: torch / torchao start-up messages that say nothing to the user are filtered where they are logged."""

import logging
import subprocess
import sys

import pytest

from harness_ext.quiet import silence

IMPORTS = "import transformers, peft\nfrom torchao.quantization.quant_primitives import choose_qparams_affine\n"


def test_exactly_the_two_noise_messages_are_dropped():
    silence()
    silence()  # idempotent
    assert sum(type(f).__name__ == "_DropNoise" for f in logging.getLogger("torchao").filters) == 1
    seen: list[str] = []

    class Collect(logging.Handler):  # on the loggers themselves: torch may stop its loggers propagating to root
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    loggers = [logging.getLogger("torchao"), logging.getLogger("torch.utils._pytree")]
    handler = Collect(level=logging.WARNING)
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)
    try:
        loggers[0].warning("Failed to load /x/_C_cutlass_90a.abi3.so: Could not load this library")
        loggers[1].warning("%s is an Enum subclass and is now natively supported by torch.compile",
                           "<enum 'KernelPreference'>")
        loggers[0].warning("a real torchao warning")
        loggers[1].warning("another pytree message")
    finally:
        for logger, level in zip(loggers, levels):
            logger.removeHandler(handler)
            logger.setLevel(level)
    assert seen == ["a real torchao warning", "another pytree message"]


def test_unlearn_imports_torchao_quietly():
    pytest.importorskip("torchao")
    quiet = subprocess.run([sys.executable, "-c", "import unlearn_app\n" + IMPORTS], capture_output=True, text=True,
                           timeout=300)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "Failed to load" not in quiet.stderr and "Enum subclass" not in quiet.stderr, quiet.stderr[-2000:]
