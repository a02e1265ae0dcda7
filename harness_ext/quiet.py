"""Start-up messages of torch and torchao that tell the user nothing, filtered where they are logged.

* torchao logs ``Failed to load .../_C_cutlass_90a.abi3.so`` (and other optional GPU kernels built for another
  Python or GPU) at import; we only use its quantization primitives, which need none of them.
* torch logs ``<enum ...> is an Enum subclass and is now natively supported by torch.compile ...`` for each Enum
  that torchao (imported by transformers / peft) still registers the old way.

:func:`silence` adds a filter to exactly those two loggers (``torchao`` and ``torch.utils._pytree``) that drops
exactly those messages; everything else they log still shows. It is called by the ``unlearn`` command and when
lm-eval's task manager loads (the lm-eval auto-registration hook), before either imports torchao.
"""

from __future__ import annotations

import logging

#: logger name -> text that marks a message as noise.
NOISE = {
    "torchao": ("Failed to load ",),
    "torch.utils._pytree": ("is an Enum subclass and is now natively supported",),
}


class _DropNoise(logging.Filter):
    def __init__(self, needles: tuple[str, ...]) -> None:
        super().__init__()
        self.needles = needles

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(n in message for n in self.needles)


def silence() -> None:
    """Install the filters (idempotent)."""
    for name, needles in NOISE.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropNoise) for f in logger.filters):
            logger.addFilter(_DropNoise(needles))
