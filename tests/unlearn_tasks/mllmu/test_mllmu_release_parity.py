"""MLLMU-Bench equals its release on the same answers (issue 59, item 3): the release's own ``eval.py`` scoring
functions, imported from its checkout with the model loop stubbed, and this package's documents and scoring, on a
40-profile fixture in the Hub's layout (``benchmarks/bench_mllmu_release.py``). Skipped when the release's checkout
is not on this machine."""

import math
from pathlib import Path

import pytest

from fixtures.scripts import load_script

pytest.importorskip("PIL")
pytest.importorskip("sklearn")  # the release's eval.py imports it

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_mllmu_release.py"


@pytest.fixture(scope="module")
def out():
    module = load_script(SCRIPT)
    if not (module.RELEASE_GIT / "HEAD").is_file():
        pytest.skip(f"the MLLMU-Bench release's checkout is not at {module.RELEASE_GIT}")
    return module.compare(module.RELEASE_GIT, n_people=40, forget_split="forget15", seed=0)


def test_the_same_requests_prompt_and_photos(out):
    assert out["commit"] == "0e3098e5ea7e4878ce4f19cdf873de1410b4d427"
    assert len(out["our_requests"]) == len(out["release_requests"]) > 400
    assert sorted(out["our_requests"]) == sorted(out["release_requests"])
    assert max(len(photos) for _, photos in out["our_requests"]) == 5  # cloze: 2 people x 2 image shots + the item


def test_every_number_equals_the_releases(out):
    for modality in ("image", "text"):
        ours, theirs = out["ours"][modality], out["release"][modality]
        assert set(ours) == set(theirs)
        for name, value in ours.items():
            assert value == theirs[name] or (math.isnan(value) and math.isnan(theirs[name])), (modality, name)
    values = [v for m in out["ours"].values() for v in m.values()]
    # a real test: accuracies between 0 and 100 (percent) and generation scores between 0 and 1 occur
    assert any(0 < v < 100 and v > 1 for v in values) and any(0 < v < 1 for v in values)
    assert 0 < out["ours"]["text"]["retain_cloze_acc"] < 100
