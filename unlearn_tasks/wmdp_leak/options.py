"""The switches of a WMDP Leak@k evaluation (``wmdp_{bio,chem,cyber}_leak``), read from the task's metadata."""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_tasks.leak_task import MAX_NEW_TOKENS, LeakOptions
from unlearn_tasks.settings import param


@dataclass
class WmdpLeakOptions(LeakOptions):
    """Leak@k on WMDP's questions: the Leak-k release's sampling defaults, few tokens (only the first letter counts)."""

    WHERE = "WMDP Leak@k task"

    leak_max_new_tokens: int = param(8, "most tokens generated per sample (the first option letter decides)", ge=1,
                                     le=MAX_NEW_TOKENS)
