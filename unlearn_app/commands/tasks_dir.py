"""``unlearn tasks-dir``: print the folder of the package's lm-eval task YAMLs."""

from __future__ import annotations

import argparse

ORDER = 200


def _cmd_tasks_dir(args: argparse.Namespace) -> int:
    from harness_ext import tasks_dir

    print(tasks_dir())
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("tasks-dir", help="Print the folder of this package's lm-eval task YAMLs "
                       "(for `lm_eval --include_path` if you switch the auto-registration off).",
                       description="Print the folder of this package's lm-eval task YAMLs. A bare `lm_eval` finds "
                       "them without it (the package's start-up hook registers them); with the hook off "
                       "(UNLEARN_LMEVAL_AUTOLOAD=0), or for a tool that reads task folders itself, pass this folder "
                       "as `lm_eval --include_path`.")
    p.set_defaults(func=_cmd_tasks_dir)
