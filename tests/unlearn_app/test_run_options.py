"""Every `unlearn run` option is declared once, as a field of RunConfig: the flags, the defaults --help shows, the
values handed to the config and the keys of the saved run config all come from it."""

import argparse
import json
from pathlib import Path

import pytest
import yaml

from unlearn_app.cli import build_parser
from unlearn_app.commands import run as run_command
from unlearn_methods.config import PATH_KEYS, RESUME_KEYS, load_run_config, run_fields

#: RunConfig's fields and the data sources' options (declared on each source's Options)
FIELDS = {f.name: f for f in run_fields()}
#: Options that have no flag (YAML config only), by hand.
YAML_ONLY = {"lora_alpha", "lora_dropout", "lora_target_modules", "warmup_steps"}


def _run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def _parse(*argv: str) -> dict:
    return run_command.option_values(_run_parser().parse_args(list(argv)))


def test_each_flag_is_a_field_and_each_field_with_a_flag_is_in_the_parser():
    actions = [a for a in _run_parser()._actions if a.dest not in ("help", "config")]
    by_dest: dict[str, list[str]] = {}
    for a in actions:
        by_dest.setdefault(a.dest, []).extend(a.option_strings)
    assert set(by_dest) == set(FIELDS) - YAML_ONLY  # every flag is a RunConfig field, every field but these a flag
    assert by_dest["lora"] == ["--lora", "--full"] and by_dest["evaldu_minimal_set"] == ["--minimal-set"]
    assert by_dest["ou_chat_mask"] == ["--ou-chat-mask", "--no-ou-chat-mask"]
    assert by_dest["hub_private"] == ["--public"] and by_dest["progress"] == ["--quiet"]
    assert by_dest["method_params"] == ["--param"]
    assert all(len(flags) == 1 for dest, flags in by_dest.items() if dest not in ("lora", "ou_chat_mask"))
    assert all(a.default is None for a in actions)  # not given: the config file or the field's default applies


def test_help_shows_the_declared_defaults():
    text = " ".join(_run_parser().format_help().split())
    for expected in ("--method METHOD Method name; `unlearn methods` lists them. (default: npo)",
                     "(default: tofu)", "--lora-r LORA_R LoRA rank. (default: 8)", "(default: 5)",
                     "Learning rate. (default: 0.0001)", "(default: 256)", "--lora Train LoRA adapters (default).",
                     "(default: every epoch)", "(default: retain90 for forget10, etc.; MUSE: retain1; DUSK: the other styles)"):
        assert expected in text, expected
    assert "(default: None)" not in text and "(default: False)" not in text


def test_no_option_given_changes_nothing():
    assert _parse() == {}
    assert load_run_config(None, model="m", out="o") == load_run_config(None, model="m", out="o", **_parse())


def test_command_line_values_reach_the_config():
    given = _parse("--method", "npo", "--model", "m", "--out", "o", "--full", "--lr", "2e-4", "--param", "beta=0.2",
                   "--param", "gamma=2", "--eval-tasks", "a,b", "--eval-every", "3", "--select", "a/x:max",
                   "--select-if", "a/y >= 1", "--select-if", "a/z <= 2", "--eval-metadata", '{"reference": "r"}',
                   "--public", "--quiet", "--minimal-set", "--merge")
    assert given["lora"] is False and given["hub_private"] is False and given["progress"] is False
    assert given["method_params"] == {"beta": "0.2", "gamma": "2"} and given["evaldu_minimal_set"] is True
    params = given.pop("method_params")
    with pytest.raises(ValueError, match="--merge only applies to LoRA runs"):
        load_run_config(None, params=params, **given)
    given.pop("merge")
    with pytest.raises(ValueError, match="--minimal-set applies to --data evaldu only, not --data tofu"):
        load_run_config(None, params=params, **given)  # an option of another data source is not ignored
    given.pop("evaldu_minimal_set")
    cfg = load_run_config(None, params=params, **given)
    assert (cfg.lr, cfg.lora, cfg.eval_tasks, cfg.eval_every) == (2e-4, False, ["a", "b"], 3)
    assert cfg.select_if == ["a/y >= 1", "a/z <= 2"] and cfg.eval_metadata == {"reference": "r"}
    assert cfg.method_params["beta"] == 0.2 and cfg.method_params["gamma"] == 2.0


@pytest.mark.parametrize("argv, message", [
    (["--param", "beta"], "argument --param: expects KEY=VALUE, got 'beta'"),
    (["--eval-metadata", "[1]"], "argument --eval-metadata: expects a JSON object"),
    (["--dtype", "float8"], "argument --dtype: invalid choice: 'float8'"),
])
def test_bad_flags_exit_2_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        _run_parser().parse_args(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_ranges_come_from_the_declaration():
    with pytest.raises(ValueError, match=r"--eval-limit must be a positive number of documents, got 0\."):
        load_run_config(None, model="m", out="o", eval_limit=0)
    with pytest.raises(ValueError, match=r"--modality must be one of text, image, both, got 'video'\."):
        load_run_config(None, model="m", out="o", modality="video")
    with pytest.raises(ValueError, match=r"--l1-lora must be >= 0, got -1\.0\."):
        load_run_config(None, model="m", out="o", l1_lora=-1)
    with pytest.raises(ValueError, match=r"Missing required option\(s\): --model, --out\."):
        load_run_config(None)
    with pytest.raises(ValueError, match=r"--seed must be >= 0 and <= 4294967295, got 4294967296\."):
        load_run_config(None, model="m", out="o", seed=2**32)  # a config file or a sweep's seeds: numpy's bound too
    assert load_run_config(None, model="m", out="o", seed=2**32 - 1).seed == 4294967295


def test_resume_and_path_keys_are_declared_on_the_fields():
    assert set(RESUME_KEYS) == {  # the 24 settings --resume compared before the declaration (epochs may grow)
        "method", "method_params", "model", "data", "data_dir", "evaldu_target", "evaldu_minimal_set", "forget",
        "retain", "lora", "merge", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "l1_lora", "lr",
        "batch_size", "grad_accum", "warmup_steps", "max_length", "seed", "dtype", "idk_file",
        "prompt_format", "system_prompt", "chat_template_args", "ou_chat_mask"} | RWKU_KEYS | LUME_KEYS | NEW_SOURCE_KEYS
    assert set(PATH_KEYS) == {"model", "out", "rwku_targets_file", "rwku_prefixes", "data_dir", "idk_file",
                              "blur_references"}


#: the options of --data rwku, added after the declaration (all compared by --resume)
RWKU_KEYS = {"rwku_target", "rwku_targets_file", "rwku_corpus", "rwku_decoding", "rwku_max_new_tokens",
             "rwku_prefixes", "rwku_questions"}
#: the options of --data lume, added after the declaration (all compared by --resume)
LUME_KEYS = {"lume_subtask", "lume_split"}
#: how a config saved before them is saved now: the same, with their defaults after the Eval-DU options
RWKU_DEFAULTS = """\
rwku_target: []
rwku_targets_file: null
rwku_corpus: llama3
rwku_decoding: sample
rwku_max_new_tokens: 512
rwku_prefixes: null
rwku_questions: 300
"""
#: the options of --data knowundo and --data blur, added after RWKU's (all compared by --resume)
NEW_SOURCE_KEYS = {"knowundo_domain", "knowundo_direct_prompt", "blur_source", "blur_references"}
NEW_SOURCE_DEFAULTS = {"knowundo_domain": "copyright", "knowundo_direct_prompt": False, "blur_source": "rwku",
                       "blur_references": None}


#: unlearn_config.yaml as the code before the declaration wrote it (TOFU forget10, npo, LoRA).
SAVED_BEFORE = """\
method: npo
model: ../models/target
out: .
data: tofu
evaldu_target: null
evaldu_minimal_set: false
data_dir: null
modality: both
forget: forget10
retain: retain90
lora: true
merge: false
lora_r: 8
lora_alpha: 16
lora_dropout: 0.0
lora_target_modules: all-linear
l1_lora: 0.0
epochs: 5.0
lr: 0.0001
batch_size: 8
grad_accum: 1
warmup_steps: 0
max_length: 256
seed: 0
dtype: float32
idk_file: null
method_params:
  gamma: 1.0
  alpha: 1.0
  beta: 0.1
save_steps: null
resume: false
overwrite: false
eval_tasks: []
eval_metadata: {}
eval_every: null
eval_limit: null
select: null
select_if: []
push_to_hub: null
hub_private: true
progress: true
"""


def test_a_run_config_saved_before_loads_and_saves_the_same(tmp_path: Path):
    saved = tmp_path / "unlearn_config.yaml"
    saved.write_text(SAVED_BEFORE)
    cfg = load_run_config(saved)
    # the same keys and values (the data sources' options, declared on the sources since, saved under their names;
    # the prompt format's options, added since, at their defaults)
    before = yaml.safe_load(SAVED_BEFORE)
    assert cfg.to_dict() == {**before, **yaml.safe_load(RWKU_DEFAULTS), **NEW_SOURCE_DEFAULTS,
                             "lume_subtask": [], "lume_split": "train",
                             "prompt_format": "auto", "system_prompt": None, "chat_template_args": {},
                             "ou_chat_mask": True, "gradient_checkpointing": False,
                             # and npo's retain term, added since, at its default
                             "method_params": {**before["method_params"], "retain_loss": "nll"}}
    assert set(cfg.to_dict()) == set(FIELDS)


def test_the_run_command_names_no_option():
    source = Path(run_command.__file__).read_text()
    named = [name for name in FIELDS if f'"{name}"' in source or f"args.{name}" in source]
    # --eval-every (unless --quiet: progress) shows the evaluation lines; --param merges over the file's parameters;
    # --model (or the config file's) is checked before the training stack is imported
    assert sorted(named) == ["eval_every", "method_params", "model", "progress"]


def test_eval_every_shows_the_evaluation_lines_unless_quiet(capsys):
    import logging

    log = logging.getLogger("unlearn_methods.eval_during")
    for extra, level in (([], logging.INFO), (["--quiet"], logging.WARNING)):
        args = _run_parser().parse_args(["--eval-every", "2", *extra])  # no --model: refused after the set-up
        assert run_command._cmd_run(args) == 2 and "Missing required option(s): --model, --out." in capsys.readouterr().err
        assert log.level == level


def test_a_run_saved_before_the_rwku_options_resumes(tmp_path: Path):
    """--resume takes an option the saved config lacks at its default, so runs saved before the option resume."""
    from unlearn_methods.training import CONFIG_FILE, UnlearningFailed, check_resume, portable_config

    cfg = load_run_config(None, model="m", out=str(tmp_path))
    saved = {k: v for k, v in portable_config(cfg, tmp_path).items() if k not in RWKU_KEYS}
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(saved, sort_keys=False))
    check_resume(cfg, tmp_path)
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump({**saved, "rwku_corpus": "phi3"}, sort_keys=False))
    with pytest.raises(UnlearningFailed, match="rwku_corpus: saved 'phi3', now 'llama3'"):
        check_resume(cfg, tmp_path)


def test_resume_on_another_process_count_needs_the_same_global_batch(tmp_path: Path, monkeypatch):
    """A checkpoint written by 2 processes (one RNG state each) resumed here, on one: the same run only at the same
    global batch (processes x --batch-size x --grad-accum), which --batch-size and --grad-accum may then keep in
    another split; another global batch is refused in one line before anything is written."""
    from types import SimpleNamespace

    from unlearn_methods import training
    from unlearn_methods.training import (
        CONFIG_FILE,
        UnlearningFailed,
        check_global_batch,
        check_resume,
        portable_config,
    )

    def config(**options):
        return load_run_config(None, model="m", out=str(tmp_path), resume=True, **options)

    saved = config(batch_size=2, grad_accum=3)  # 2 processes: 12 rows a step
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(portable_config(saved, tmp_path), sort_keys=False))
    checkpoint = tmp_path / "checkpoints" / "checkpoint-4"
    checkpoint.mkdir(parents=True)
    for rank in (0, 1):
        (checkpoint / f"rng_state_{rank}.pth").write_bytes(b"")
    for same in (config(batch_size=2, grad_accum=6), config(batch_size=12), config(batch_size=4, grad_accum=3)):
        check_global_batch(same, tmp_path)
        check_resume(same, tmp_path)
    with pytest.raises(UnlearningFailed, match=r"^--resume: the checkpoint in .* was written by 2 processes with "
                       r"--batch-size 2 --grad-accum 3, 12 rows a step; 1 process with --batch-size 2 --grad-accum "
                       r"3 would take 6\. Resume on 1 process with --batch-size and --grad-accum making 12 rows per "
                       r"process \(e\.g\. --batch-size 2 --grad-accum 6\), or on 2 processes\.$"):
        check_global_batch(saved, tmp_path)
    with pytest.raises(UnlearningFailed, match="12 rows a step; 1 process with --batch-size 5 --grad-accum 1 would "
                       r"take 5\. Resume on 1 process with .*e\.g\. --batch-size 2 --grad-accum 6"):
        check_global_batch(config(batch_size=5), tmp_path)
    (checkpoint / "rng_state_2.pth").write_bytes(b"")  # 3 processes: 18 rows a step, which 4 cannot share
    with monkeypatch.context() as m:
        m.setattr(training, "main_process", lambda: SimpleNamespace(num_processes=4))
        with pytest.raises(UnlearningFailed, match=r"18 rows a step; 4 processes with --batch-size 2 --grad-accum 3 "
                           r"would take 24\. 18 rows do not divide among 4 processes: resume on 3 processes\.$"):
            check_global_batch(saved, tmp_path)
    (checkpoint / "rng_state_2.pth").unlink()
    # a try on 1 process at another split (--batch-size 4 --grad-accum 3), stopped before its first checkpoint,
    # rewrote the config: the checkpoint's own layout (the Trainer's stateful callbacks) is what it was written with
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(portable_config(config(batch_size=4, grad_accum=3), tmp_path)))
    state = {"stateful_callbacks": {"RunLayout": {"args": {}, "attributes": {"layout": {
        "processes": 2, "batch_size": 2, "grad_accum": 3}}}}}
    (checkpoint / "trainer_state.json").write_text(json.dumps(state))
    with monkeypatch.context() as m:
        m.setattr(training, "main_process", lambda: SimpleNamespace(num_processes=2))
        check_global_batch(saved, tmp_path)
        check_resume(saved, tmp_path)  # the layout's 2 x 3, not the config's 4 x 3
        with pytest.raises(UnlearningFailed, match="batch_size: saved 2, now 4"):
            check_resume(config(batch_size=4, grad_accum=3), tmp_path)
    with pytest.raises(UnlearningFailed, match="2 processes with --batch-size 2 --grad-accum 3, 12 rows a step"):
        check_global_batch(config(batch_size=4, grad_accum=1), tmp_path)
    check_global_batch(config(batch_size=4, grad_accum=3), tmp_path)  # 12 rows on 1 process
    (checkpoint / "trainer_state.json").write_text(json.dumps({"stateful_callbacks": {}}))
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(portable_config(saved, tmp_path), sort_keys=False))
    (checkpoint / "rng_state_1.pth").unlink()
    (checkpoint / "rng_state_0.pth").rename(checkpoint / "rng_state.pth")  # one process wrote it: as before
    check_global_batch(saved, tmp_path)
    with pytest.raises(UnlearningFailed, match="batch_size: saved 2, now 12"):
        check_resume(config(batch_size=12), tmp_path)


def test_a_sweeps_seeds_are_checked_against_the_declared_range():
    from unlearn_app.sweep.spec import SpecError, parse_spec

    with pytest.raises(SpecError, match=r"--seed must be >= 0 and <= 4294967295, got 4294967296\."):
        parse_spec("model: m\nseeds: [0, 4294967296]\nmethods: {npo: {}}\n")
