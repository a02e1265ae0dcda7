"""`rwku_utility`: every lm-eval task it names is in the installed lm-eval's own index (offline: its task YAMLs),
at the release's shots (MMLU 5, BBH chain-of-thought 3, TruthfulQA with the QA primer and no extra shots,
TriviaQA 5)."""

from pathlib import Path

import lm_eval
import pytest
import yaml

from harness_ext import tasks_dir

GROUP = Path(tasks_dir()) / "rwku" / "rwku_utility.yaml"
LM_EVAL_TASKS = Path(lm_eval.__file__).parent / "tasks"
#: the release's shots per lm-eval task (eval_mmlu.py: the subject's 5 dev examples; eval_bbh.py: the task's 3
#: chain-of-thought examples; eval_truthfulqa.py: the 'qa' primer only; eval_triviaqa.py: 5 fixed examples)
RELEASE_SHOTS = {"mmlu": 5, "bbh_cot_fewshot": 3, "truthfulqa_mc1": 0, "truthfulqa_mc2": 0, "triviaqa": 5}


def _members() -> dict[str, dict]:
    entries = yaml.safe_load(GROUP.read_text())["task"]
    out = {}
    for entry in entries:
        name = entry if isinstance(entry, str) else entry.get("task") or entry.get("group")
        out[name] = {} if isinstance(entry, str) else {k: v for k, v in entry.items() if k not in ("task", "group")}
    return out


#: where the installed lm-eval sets the shots of the members the group leaves at their own setting
OWN_SHOTS = {"bbh_cot_fewshot": "bbh/cot_fewshot/_cot_fewshot_template_yaml",
             "truthfulqa_mc1": "truthfulqa/truthfulqa_mc1.yaml",
             "truthfulqa_mc2": "truthfulqa/truthfulqa_mc1.yaml"}  # mc2 includes mc1's file


def _own_shots(name: str) -> int:
    lines = (LM_EVAL_TASKS / OWN_SHOTS[name]).read_text(encoding="utf-8").splitlines()
    return int(next(line.split(":")[1] for line in lines if line.startswith("num_fewshot:")))


def test_every_member_is_in_lm_evals_index():
    from lm_eval.tasks import TaskManager

    index = set(TaskManager().all_tasks)
    members = _members()
    assert set(members) == {*RELEASE_SHOTS, "rwku_utility_fluency"}
    assert set(members) <= index and "rwku_utility" in index
    assert lm_eval.__version__ == "0.4.13" or pytest.skip(f"names checked against lm-eval 0.4.13, {lm_eval.__version__}")


def test_shots_are_the_releases():
    members = _members()
    for name, shots in RELEASE_SHOTS.items():
        own = members[name].get("num_fewshot")
        if own is None:  # the task's own setting (BBH CoT: 3 in its template; TruthfulQA: 0, primer in the prompt)
            own = _own_shots(name)
        assert own == shots, name
    assert "num_fewshot" not in (LM_EVAL_TASKS / "truthfulqa" / "truthfulqa_mc2.yaml").read_text()
    primer = "Q: What is human life expectancy in the United States?"  # the release's 'qa' preset starts so
    mc1 = (LM_EVAL_TASKS / "truthfulqa" / "truthfulqa_mc1.yaml").read_text()
    assert primer in mc1 and "include: truthfulqa_mc1.yaml" in (LM_EVAL_TASKS / "truthfulqa" / "truthfulqa_mc2.yaml").read_text()
