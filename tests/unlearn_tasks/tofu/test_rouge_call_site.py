"""TOFU's ROUGE is ROUGE-L *recall*, stemmed, of the generation against the answer, as ``score_document`` records it:
checked on generations where recall, precision, F1 and the unstemmed recall all differ (hand-computed LCS)."""

import pytest

from unlearn_tasks.tofu.options import TofuOptions
from unlearn_tasks.tofu.scoring import score_document

DOC = {"split": "forget", "index": 0, "question": "What did Soren do?", "answer": "The cat sat on the mat",
       "paraphrased_answer": "", "perturbed_answers": []}


@pytest.mark.parametrize("answer, generation, recall, not_it", [
    # LCS "the cat sat" = 3 of the answer's 6 tokens: recall 1/2; precision 3/3 = 1, F1 = 2/3
    ("The cat sat on the mat", "the cat sat", 3 / 6, [1.0, 2 / 3]),
    # LCS "the cat" + "the mat" = 4 of 6, in a 9-token generation: recall 2/3; precision 4/9, F1 = 8/15
    ("The cat sat on the mat", "the cat ran far from the big red mat", 4 / 6, [4 / 9, 8 / 15]),
    # stemmed, "writing"/"writes" -> "write" and "novels"/"novel" -> "novel": LCS he write novel = 3 of 4;
    # unstemmed only "he" is shared (1/4); F1 stemmed = 2 * 3/4 * 1 / (3/4 + 1) = 6/7
    ("He was writing novels", "he writes novel", 3 / 4, [1 / 4, 6 / 7]),
])
def test_the_record_holds_stemmed_rouge_l_recall(answer, generation, recall, not_it):
    record = score_document({**DOC, "answer": answer}, generation, [], TofuOptions())
    assert record["rougeL_recall"] == pytest.approx(recall, abs=1e-12)
    assert all(abs(recall - other) > 0.05 for other in not_it)  # the fixture tells recall from the other numbers
