"""Pages say where what they use comes from: every benchmark README (task_yaml/<benchmark>/README.md) ends its paper
section with the paper's BibTeX, and the depth page and `unlearn depth --help` name the repository and path of the
annotation file `--entities` takes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = sorted((ROOT / "task_yaml").glob("*/README.md"))


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.name)
def test_every_benchmark_readme_cites_its_paper_in_bibtex(readme):
    blocks = re.findall(r"^```bibtex\n(.*?)^```", readme.read_text(), flags=re.S | re.M)
    assert blocks, f"{readme.relative_to(ROOT)} has no ```bibtex block"
    for block in blocks:
        assert re.match(r"@\w+\{\w+,", block) and "title" in block and "year" in block, block


def test_the_depth_page_and_help_say_where_the_entities_file_comes_from():
    from unlearn_app.cli import build_parser

    page = " ".join((ROOT / "docs" / "depth.md").read_text().split())
    assert "tofu_data/forget10_filtered.json" in page and "github.com/gnueaj/unlearning-depth-score" in page
    sub = next(a for a in build_parser("depth")._actions if a.dest == "command").choices["depth"]
    (entities,) = [a for a in sub._actions if a.dest == "entities"]
    assert "github.com/gnueaj/unlearning-depth-score" in entities.help and "forget10_filtered.json" in entities.help
