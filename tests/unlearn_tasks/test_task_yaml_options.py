"""Every task YAML's metadata reads through its benchmark's declared options (the choices and ranges of the param()
fields admit every value the shipped tasks use, e.g. the comprehension formats' split ``full``)."""

from pathlib import Path

import pytest
import yaml

from unlearn_app.catalogue import option_families, options_class

ROOT = Path(__file__).resolve().parents[2]


class _Loader(yaml.SafeLoader):
    """Task YAMLs with their ``!function`` tags left unresolved."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _tasks(family: str):
    for path in sorted((ROOT / "task_yaml" / family).rglob("*")):
        if path.suffix in (".md", ".py") or not path.is_file():
            continue
        config = yaml.load(path.read_text(), Loader=_Loader)
        if isinstance(config, dict) and isinstance(config.get("task"), str) and isinstance(config.get("metadata"), dict):
            yield path, config["metadata"]


@pytest.mark.parametrize("family", option_families())
def test_every_task_yaml_s_metadata_is_valid(family):
    from unlearn_tasks.tofu.options import TofuOptions

    read = 0
    for path, metadata in _tasks(family):
        clear_text = family == "clear" and path.name.endswith("_text.yaml")  # CLEAR's text part is TOFU
        cls = TofuOptions if clear_text else options_class(family)
        if metadata.get("benchmark") == "file":
            metadata = {**metadata, "data_file": "records.jsonl"}  # the generic margins task takes the user's file
        if family == "blur":
            metadata = {**metadata, "blur_references": "refs/BASE"}  # BLUR's tasks take the user's base-model answers
        cls.from_metadata(metadata)
        read += 1
    assert read >= 2, f"task_yaml/{family}: only {read} task YAMLs found"
