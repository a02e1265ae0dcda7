"""Issue 26, item 4: open-unlearning's gibberish metric (a text classifier's class-0 probability of the forget
generations) with a tiny classifier built here, offline."""

import pytest

from fixtures.classifier import build_constant_classifier
from unlearn_tasks.classifier import ClassifierError, class_probabilities
from unlearn_tasks.tofu.aggregate import metric_names
from unlearn_tasks.tofu.options import TofuOptions


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A 2-class classifier with P(class 0) = 3/4 for every text (:mod:`fixtures.classifier`)."""
    return build_constant_classifier(tmp_path_factory.mktemp("tiny_classifier"))


def test_class_probabilities_of_a_tiny_classifier(classifier):
    probs = class_probabilities(str(classifier), ["the cat sat", "zxq zxq", ""], batch_size=2, device="cpu")
    assert probs == pytest.approx([0.75, 0.75, 0.75])  # softmax(log 3, 0)[0] = 3 / (3 + 1)
    assert class_probabilities(str(classifier), ["the cat"], class_id=1, device="cpu") == pytest.approx([0.25])
    with pytest.raises(ClassifierError, match="class_id 2 is not a class"):
        class_probabilities(str(classifier), ["x"], class_id=2, device="cpu")


def test_an_unloadable_classifier_is_named(tmp_path):
    with pytest.raises(ClassifierError, match="Cannot load the text classifier"):
        class_probabilities(str(tmp_path), ["x"], device="cpu")


def test_the_option_turns_the_metric_on(classifier):
    assert TofuOptions.from_metadata({}).gibberish_classifier() is None
    assert TofuOptions.from_metadata({"gibberish": True}).gibberish_classifier().startswith("madhurjindal/")
    assert TofuOptions.from_metadata({"gibberish": str(classifier)}).gibberish_classifier() == str(classifier)
    with pytest.raises(ValueError, match="does not exist"):
        TofuOptions.from_metadata({"gibberish": "/no/such/classifier"})
    assert "forget_gibberish" in metric_names(["generation", "likelihood"], gibberish=True)
    assert "forget_gibberish" not in metric_names(["likelihood"], gibberish=True)


def test_the_task_scores_the_forget_generations(classifier, demo_data_dir):
    from lm_eval.tasks import TaskManager

    from harness_ext import tasks_dir

    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                     metadata={"data_dir": str(demo_data_dir), "gibberish": str(classifier)})
    task = tm.load(["tofu_forget01_rouge"])["tasks"]["tofu_forget01_rouge"]
    docs = [d for d in task.test_docs() if d["split"] in ("forget", "retain")][:3]
    records = [task.score_document(d, ["the cat sat "]) for d in docs]
    assert [("generation" in r) for r in records] == [d["split"] == "forget" for d in docs]
    assert task.compute_metrics(records)["forget_gibberish"] == pytest.approx(0.75)
