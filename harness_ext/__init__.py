"""The lm-eval extension, the bottom layer: what this package adds to lm-eval, knowing no benchmark.

- finding our tasks: :mod:`.autoload` (the start-up hook) and :func:`tasks_dir`;
- the request types a task can ask for: :mod:`.request_types` (:mod:`.answer_logprobs`, :mod:`.generate_tokens`;
  images in :mod:`.multimodal`; the per-token statistics in :mod:`.token_scoring`);
- the base class of every benchmark task: :mod:`.task_base`; one-line input errors: :mod:`.input_errors`;
- running lm-eval from Python and reading its results: :mod:`.evaluate`, :mod:`.results`; :mod:`.provenance`;
- the patches of lm-eval internals that an lm-eval upgrade can break: :mod:`.lm_eval_patches`;
- lm-eval 0.4.13 and 0.5 alike: which line runs (:mod:`.lm_eval_version`), requests and responses
  (:mod:`.instances`), lm-eval's metric helpers (:mod:`.lm_eval_metrics`); nothing above this layer imports
  lm-eval's internals (docs/architecture.md, "lm-eval's internals on 0.4.13 and 0.5").

The ``unlearn`` command line, reports and plots live in ``unlearn_app``; reference logs in ``unlearn_tasks``.
"""

from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent.parent / "task_yaml"


def tasks_dir() -> Path:
    """The folder holding this package's lm-eval task YAMLs (for ``--include_path`` or ``TaskManager``)."""
    return TASKS_DIR
