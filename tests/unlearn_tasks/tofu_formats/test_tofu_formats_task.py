"""The ReLU tasks inside lm-eval: discovery, requests, hand-computed scores in both modes, a tiny-model run."""

import json
import math

import pytest
from lm_eval import simple_evaluate
from lm_eval.tasks import TaskManager

from fixtures.tofu_formats import EXPECTED, PARITY_ZERO, ScriptedLM, write_fixture
from harness_ext import tasks_dir
from harness_ext.results import task_metrics
from unlearn_app.reports.tables import relu_metrics, relu_table
from unlearn_tasks.tofu_formats import yamls
from unlearn_tasks.tofu_formats.formats import FORMATS, GAP, all_task_names, group_names


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("relu_fixture"))


@pytest.fixture(scope="module")
def relu_demo_dir(tmp_path_factory):
    from unlearn_methods.scaffolding.tofu_formats_corpus import write_formats

    return write_formats(tmp_path_factory.mktemp("relu_demo"))


def _manager(**metadata):
    return TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)


def test_every_name_is_indexed_and_the_yamls_are_current():
    """lm-eval silently skips a YAML it cannot parse: every task and group must be in the index."""
    names = set(all_task_names()) | set(group_names())
    assert len(all_task_names()) == 109
    assert names <= set(_manager().all_tasks)
    for rel, text in yamls.render().items():
        assert (tasks_dir() / "tofu_formats" / rel).read_text() == text, f"{rel} is stale: python -m unlearn_tasks.tofu_formats.yamls"


def _scores(res, task):
    return task_metrics(res)[task]


def _run(fixture_dir, tasks, **metadata):
    lm = ScriptedLM()
    res = simple_evaluate(model=lm, tasks=tasks, task_manager=_manager(data_dir=str(fixture_dir), **metadata),
                          bootstrap_iters=0)
    return res, lm


@pytest.mark.parametrize("mode", ["default", "parity"])
def test_pair_tasks_hand_computed(fixture_dir, mode, tiny_model_dir):
    res, lm = _run(fixture_dir, list(EXPECTED), relu_mode=mode, tokenizer=str(tiny_model_dir))
    if mode == "parity":  # the release's own tokenisation and generation: token ids in the requests, no EOS
        assert len(lm.requests["unlearn_generate_tokens"]) == 3  # comprehension QA; analogy QA is not in the release
        assert all(ctx.startswith("Question: ") for ctx, _ in lm.requests["generate_until"])
        assert all(args[2]["append_eos"] is False for args in lm.requests["unlearn_answer_logprobs"])
    for task, (forget, retain) in EXPECTED.items():
        if mode == "parity" and task in PARITY_ZERO:
            forget, retain = 0.0, 0.0
        metric = FORMATS[task.removeprefix("tofu_").split("_2opt")[0].split("_3opt")[0]].metric
        got = _scores(res, task)
        assert got[f"forget_{metric}"] == pytest.approx(forget), task
        assert got[f"retain_{metric}"] == pytest.approx(retain), task
        assert got[GAP] == pytest.approx(forget - retain), task
    if mode == "default":  # the report table across formats (two models side by side)
        numbers = relu_metrics(task_metrics(res))
        table = relu_table({"scripted": numbers, "other": {"tofu_cloze/forget_prob": 0.25}})
        assert "| MCQA (4 options) | forget accuracy | 0.5000 | n/a |" in table
        assert "|  | gap (forget - retain) | -0.1667 | n/a |" in table
        assert "| Cloze | forget probability | 0.1353 | 0.2500 |" in table
        assert "MCQA (3 options)" not in table  # formats nobody ran are left out


def test_single_split_tasks_and_their_requests(fixture_dir):
    tasks = ["tofu_mcqa_2opt_forget10", "tofu_mcqa_retain90", "tofu_cloze_forget10", "tofu_comprehension_qa_retain90"]
    res, lm = _run(fixture_dir, tasks)
    assert _scores(res, "tofu_mcqa_2opt_forget10")["acc"] == pytest.approx(0.5)
    assert _scores(res, "tofu_mcqa_retain90")["acc"] == pytest.approx(2 / 3)
    assert _scores(res, "tofu_cloze_forget10")["prob"] == pytest.approx(math.exp(-2.0))
    assert _scores(res, "tofu_comprehension_qa_retain90")["rouge_f1"] == pytest.approx(5 / 6)
    assert res["higher_is_better"]["tofu_mcqa_2opt_forget10"]["acc"] is False  # lower forget = more unlearned
    # default mode: 2 letters per 2-option item (2 items), 4 per 4-option item (3 items)
    conts = [c for _, c in lm.requests["loglikelihood"]]
    assert sorted(conts) == sorted([" A", " B"] * 2 + [" A", " B", " C", " D"] * 3)
    (ctx, cont), = lm.requests["unlearn_answer_logprobs"]  # the record with two [MASK]s is dropped
    assert ctx == ("Question: In which genre does Hina Ameen primarily write?\n"
                   "Answer: Hina Ameen primarily contributes to the ") and cont == "geology genre"


def test_parity_compares_all_four_letters(fixture_dir):
    _, lm = _run(fixture_dir, ["tofu_mcqa_2opt_forget10"], relu_mode="parity")
    assert sorted(c for _, c in lm.requests["loglikelihood"]) == sorted([" A", " B", " C", " D"] * 2)


def test_relu_pair_picks_another_forget_split(relu_demo_dir):
    task = _manager(data_dir=str(relu_demo_dir), relu_pair="forget05").load(["tofu_cloze"])["tasks"]["tofu_cloze"]
    docs = list(task.test_docs())
    assert {d["split"] for d in docs} == {"forget05", "retain95"}
    assert [d["role"] for d in docs[:4]] == ["forget", "retain", "forget", "retain"]  # interleaved


def test_gated_dataset_error_says_what_to_do(monkeypatch):
    import datasets

    from unlearn_tasks.dataset_loader import DATA_DIR_ENV, DataError

    def gated(*args, **kwargs):
        raise PermissionError("403 Client Error: Dataset 'Exploration-Lab/ReLU' is a gated dataset on the Hub.")

    monkeypatch.setattr(datasets, "load_dataset", gated)
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    with pytest.raises(DataError, match=r"Exploration-Lab/ReLU is gated\. Accept its terms at "
                                        r"https://huggingface\.co/datasets/Exploration-Lab/ReLU .*HF_TOKEN"):
        _manager().load(["tofu_mcqa_forget01"])


@pytest.mark.slow
def test_tiny_model_end_to_end_on_the_demo_formats(tiny_model_dir, relu_demo_dir, tmp_path):
    """The default tasks run on the hf backend; the letter choice equals an argmax over the letter tokens' logits
    at the prompt's last position (the release's rule), and comprehension QA gets the answer's token budget."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tm = _manager(data_dir=str(relu_demo_dir), relu_mode="parity", pretrained=str(tiny_model_dir))
    tasks = ["tofu_mcqa_2opt", "tofu_cloze", "tofu_odd_one_out", "tofu_comprehension_qa", "tofu_analogy_qa"]
    res = simple_evaluate(model="hf", model_args={"pretrained": str(tiny_model_dir), "dtype": "float32"},
                          device="cpu", tasks=tasks, task_manager=tm, limit=4, bootstrap_iters=0, log_samples=True,
                          gen_kwargs="max_gen_toks=16", batch_size=8)
    for task in tasks:
        values = _scores(res, task)
        assert len(values) == 3 and all(not math.isnan(v) for v in values.values()), (task, values)
        forget, retain = (v for k, v in values.items() if k != GAP)
        assert values[GAP] == pytest.approx(forget - retain)
    # the leaderboard recomputes every number from the samples as lm-eval writes them (JSON lines)
    from unlearn_app.leaderboard.recompute import parse_samples, recompute_run

    logged = {t: "".join(json.dumps(s, default=str) + "\n" for s in res["samples"][t]).encode() for t in tasks}
    again = recompute_run(res, {t: parse_samples(data, t) for t, data in logged.items()})
    for task in tasks:
        assert again[task].values == pytest.approx(task_metrics(res)[task]) and not again[task].unverifiable

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    letter_ids = [tok.encode(f" {L}")[-1] for L in "ABCD"]
    for sample in res["samples"]["tofu_mcqa_2opt"]:
        assert sample["doc"]["choices"] == ["A", "B", "C", "D"]  # parity: four letters for two options
        with torch.no_grad():
            logits = model(torch.tensor([tok.encode(sample["doc"]["prompt"])])).logits[0, -1]
        pred = int(torch.argmax(logits[letter_ids]))
        role, acc = sample["forget_acc"]  # a pair task's per-document value: (role, score)
        assert role == sample["doc"]["role"] and acc == float(pred == sample["doc"]["gold"])
    for sample in res["samples"]["tofu_comprehension_qa"]:
        budget = len(tok(sample["doc"]["target"])["input_ids"])
        # parity: the release's budget and prompt ids, through unlearn_generate_tokens
        options = sample["arguments"][0][1]
        assert sample["doc"]["max_gen_toks"] == budget == options["max_new_tokens"]
        assert options["context_ids"] == tok(sample["doc"]["prompt"])["input_ids"]
