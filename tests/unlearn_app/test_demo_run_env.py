"""How the demos run (unlearn_app/demo/run_env.py): one thread and deterministic algorithms inside, restored after;
the Trainer's printed log lines in the demo's log file, not on the terminal; one warning dropped, others kept."""

from __future__ import annotations

import logging

import torch

from unlearn_app.demo.run_env import TRAINING_LOG, reproducible, training_log, without_warning


def test_reproducible_sets_one_thread_and_deterministic_algorithms_then_restores_both():
    before = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    with reproducible():
        assert torch.get_num_threads() == 1 and torch.are_deterministic_algorithms_enabled()
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == before


def test_training_log_appends_what_is_printed_to_the_file(tmp_path, capsys):
    (tmp_path / TRAINING_LOG).write_text("earlier\n")
    with training_log(tmp_path):
        print({"loss": "1.5", "epoch": "1"})
    print("after")
    assert (tmp_path / TRAINING_LOG).read_text() == "earlier\n{'loss': '1.5', 'epoch': '1'}\n"
    assert capsys.readouterr().out == "after\n"


def test_without_warning_drops_only_the_named_message(caplog):
    log = logging.getLogger("unlearn_tasks.tofu.task")
    with caplog.at_level(logging.WARNING), without_warning("unlearn_tasks.tofu.task", "%s: no reference log given"):
        log.warning("%s: no reference log given, so forget_quality and privleak are reported as NaN.", "tofu_forget10")
        log.warning("%s: the reference scored answers with answer_scoring=%r", "tofu_forget10", "tofu")
    log.warning("%s: no reference log given", "tofu_forget01")
    assert [r.getMessage() for r in caplog.records] == [
        "tofu_forget10: the reference scored answers with answer_scoring='tofu'", "tofu_forget01: no reference log given"]
