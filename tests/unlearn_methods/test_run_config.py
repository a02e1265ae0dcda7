"""Issue 12, item 8: run options and method hyperparameters are parsed by their declared types and ranges before
anything is loaded (YAML 1.1 reads ``1e-5`` as a string; ``--param beta=0`` would divide by zero)."""

import pytest
import yaml

from unlearn_methods.config import load_run_config

BASE = dict(model="m", out="o", method="npo")


def test_yaml_exponent_without_dot_is_a_float(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("lr: 1e-5\nepochs: '2'\nlora: 'false'\nmethod_params:\n  beta: 5e-2\n")
    assert isinstance(yaml.safe_load(config.read_text())["lr"], str)  # the trap: PyYAML (YAML 1.1) gives '1e-5'
    cfg = load_run_config(config, **BASE)
    assert cfg.lr == 1e-5 and isinstance(cfg.lr, float)
    assert cfg.epochs == 2.0 and cfg.lora is False
    assert cfg.method_params["beta"] == 0.05


def test_param_values_take_the_methods_declared_types():
    cfg = load_run_config(None, params={"beta": "5e-2", "gamma": 1}, **BASE)
    assert cfg.method_params["beta"] == 0.05 and cfg.method_params["gamma"] == 1.0
    assert isinstance(cfg.method_params["gamma"], float)
    cfg = load_run_config(None, params={"layer": "2"}, model="m", out="o", method="rmu")
    assert cfg.method_params["layer"] == 2


@pytest.mark.parametrize("params, message", [
    ({"beta": "abc"}, "parameter beta='abc' is not allowed; expected float"),
    ({"beta": 0}, "parameter beta=0.0 is not allowed; expected float > 0"),
    ({"beta": -1.0}, "parameter beta=-1.0 is not allowed"),
    ({"beta": "nan"}, "parameter beta=nan is not allowed"),
    ({"betta": 0.1}, r"has no parameter\(s\) \['betta'\]"),
])
def test_bad_method_params_are_refused_before_training(params, message):
    with pytest.raises(ValueError, match=message):
        load_run_config(None, params=params, **BASE)


@pytest.mark.parametrize("overrides, message", [
    ({"lr": "fast"}, "--lr must be a number, got 'fast'"),
    ({"batch_size": "2.5"}, "--batch-size must be an integer"),
    ({"lora": "maybe"}, "--lora must be true or false"),
    ({"lr": 0}, "--lr must be positive"),
    ({"lora_dropout": 1.5}, r"--lora-dropout must be in \[0, 1\)"),
    ({"dtype": "float8"}, "--dtype must be one of"),
    ({"save_steps": 0}, "--save-steps must be positive"),
])
def test_bad_run_options_name_the_option(overrides, message):
    with pytest.raises(ValueError, match=message):
        load_run_config(None, **{**BASE, **overrides})


def test_missing_config_file_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"nope.yaml: config file does not exist"):
        load_run_config(tmp_path / "nope.yaml", **BASE)
