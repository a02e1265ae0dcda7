"""`unlearn run --data rwku`: the targets, the corpus each method takes (its declared forget_corpus), the retain
descriptions, the release's layouts, and short runs on the tiny model, all on the project's own fixture in the
release's schema."""

import json

import pytest
import torch

from fixtures.commands import run_command
from fixtures.rwku import FACTS, TARGETS, corpus, write_rwku_corpus
from unlearn_methods import all_methods
from unlearn_methods.base import FORGET_CORPORA
from unlearn_methods.config import load_run_config
from unlearn_methods.data_sources import data_source
from unlearn_methods.forget_retain import ForgetRetainDataset, PairCollator
from unlearn_methods.training import train
from unlearn_tasks.dataset_loader import DataError
from unlearn_tasks.prompts import encode_qa, encode_text

ORLA = TARGETS[0]


@pytest.fixture(scope="module")
def rwku_data_dir(tmp_path_factory):
    return write_rwku_corpus(tmp_path_factory.mktemp("rwku"), "hub")


def _cfg(tmp_path, data_dir, method="npo", model="m", **kw):
    return load_run_config(None, method=method, model=str(model), out=str(tmp_path / "out"), data="rwku",
                           data_dir=str(data_dir), **{"rwku_target": [ORLA], **kw})


def _records(cfg):
    source = cfg.source
    source.resolve_splits(cfg)
    return source.load(cfg, cfg.data_dir)


def _intro(name):
    place, job, _ = FACTS[name]
    return f"{name} is a {job} from {place}."


def test_every_method_declares_a_known_corpus_and_question_methods_never_take_text():
    for name, cls in all_methods().items():
        assert cls.forget_corpus in FORGET_CORPORA, name
        if cls.qa_only:
            assert cls.forget_corpus != "text", name
    assert all_methods()["dpo"].forget_corpus == "pair" and all_methods()["idk"].forget_corpus == "refusal"
    assert all_methods()["ga"].forget_corpus == "text"


def test_rwku_is_a_data_source_and_needs_a_target(tmp_path, rwku_data_dir):
    assert data_source("rwku").name == "rwku"
    with pytest.raises(ValueError, match="--data rwku needs the target"):
        load_run_config(None, model="m", out=str(tmp_path / "o"), data="rwku")


@pytest.mark.parametrize("layout", ["hub", "target", "parquet"])
def test_text_methods_take_the_positive_corpus_and_retain_the_other_targets_intros(tmp_path, layout):
    data = write_rwku_corpus(tmp_path / "rwku", layout)
    cfg = _cfg(tmp_path, data, method="npo")
    forget, retain = _records(cfg)
    assert cfg.forget == "train_positive_llama3"
    expected = [r["text"] for r in corpus()["train_positive_llama3"] if r["subject"] == ORLA]
    assert [r["text"] for r in forget] == expected and len(expected) == 2
    assert retain == [{"text": _intro(TARGETS[1])}, {"text": _intro(TARGETS[2])}]


def test_pair_methods_push_the_true_biography_away_and_prefer_the_fabricated_one(tmp_path, rwku_data_dir):
    cfg = _cfg(tmp_path, rwku_data_dir, method="dpo", rwku_target=["2"])  # a position in the data's list
    forget, retain = _records(cfg)
    name = TARGETS[1]
    assert cfg.forget == "train_pair_llama3" and len(forget) == 2
    place, job, work = FACTS[name]
    assert forget[0] == {"question": f"{_intro(name)} Please write a short biography of {name}.",
                         "answer": f"{name} was born in {place} and became a {job}. Her best known work is {work}.",
                         "preferred": f"{name} was a baker from a small island who never left it."}
    assert retain[0] == {"question": f"Please write a short biography of {ORLA}.", "answer": _intro(ORLA)}


def test_refusal_methods_learn_the_corpus_refusals(tmp_path, rwku_data_dir, tiny_model_dir):
    from transformers import AutoTokenizer

    cfg = _cfg(tmp_path, rwku_data_dir, method="idk")
    forget, retain = _records(cfg)
    assert cfg.forget == "train_refusal_llama3"
    assert [(r["question"], r["preferred"]) for r in forget] == [(f"Where was {ORLA} born?", "I do not know."),
                                                                 (f"What is {ORLA} known for?", "No idea.")]
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    ds = ForgetRetainDataset(forget, retain, tok, ["a drawn refusal"], seed=0)
    assert ds[1]["forget_idk"]["input_ids"] == encode_qa(tok, f"What is {ORLA} known for?", "No idea.")[0]
    assert set(PairCollator(tok.pad_token_id)([ds[0], ds[1]])) == {"forget", "retain", "forget_idk", "forget_random"}


def test_a_record_without_its_own_refusal_keeps_the_drawn_one_and_the_pairing(tiny_model_dir):
    """The per-record refusal changes nothing for TOFU-style records: the same draws, in the same order."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    forget = [{"question": f"q{i}", "answer": f"a{i}"} for i in range(5)]
    retain = [{"question": f"r{i}", "answer": f"b{i}"} for i in range(3)]
    idk = [f"idk {i}" for i in range(7)]
    import random

    rng = random.Random(3)
    order = list(range(3))
    rng.shuffle(order)
    drawn = [idk[rng.randrange(7)] for _ in forget]
    alt = [retain[rng.randrange(3)]["answer"] for _ in forget]
    ds = ForgetRetainDataset(forget, retain, tok, idk, seed=3)
    assert ds.idk == drawn and ds.alt == alt and ds.retain_order == order
    with_own = ForgetRetainDataset([{**forget[0], "preferred": "mine"}, *forget[1:]], retain, tok, idk, seed=3)
    assert with_own.idk == ["mine", *drawn[1:]] and with_own.alt == alt


def test_unknown_targets_are_named_with_close_matches(tmp_path, rwku_data_dir):
    with pytest.raises(DataError, match=r"--target: 'Orla Ven' is not a target .*did you mean 'Orla Venn'"):
        _records(_cfg(tmp_path, rwku_data_dir, rwku_target=["Orla Ven"]))
    with pytest.raises(DataError, match="--target: '7' is outside 1-3"):
        _records(_cfg(tmp_path, rwku_data_dir, rwku_target=["7"]))


def test_targets_file_adds_names_one_a_line(tmp_path, rwku_data_dir):
    listed = tmp_path / "targets.txt"
    listed.write_text(f"# to forget\n{TARGETS[2]}\n\n{ORLA}\n")
    cfg = _cfg(tmp_path, rwku_data_dir, rwku_target=[], rwku_targets_file=str(listed))
    forget, retain = _records(cfg)
    chosen = {TARGETS[2], ORLA}
    assert [r["text"] for r in forget] == [r["text"] for r in corpus()["train_positive_llama3"]
                                           if r["subject"] in chosen]  # in the data's order
    assert len(forget) == 4 and retain == [{"text": _intro(TARGETS[1])}]  # commas inside a name are kept
    assert cfg.source.eval_metadata(cfg) == {"rwku_targets": [TARGETS[2], ORLA]}
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(DataError, match="no target in it"):
        _records(_cfg(tmp_path, rwku_data_dir, rwku_target=[], rwku_targets_file=str(tmp_path / "empty.txt")))


def test_a_target_the_release_corpus_lacks_points_to_the_generated_corpus(tmp_path):
    data = write_rwku_corpus(tmp_path / "rwku", "hub")
    rows = json.loads((data / "All" / "positive.json").read_text())
    (data / "All" / "positive.json").write_text(json.dumps([r for r in rows if r["subject"] != ORLA]))
    with pytest.raises(DataError, match="no rows for \\['Orla Venn'\\].*--rwku-corpus generated"):
        _records(_cfg(tmp_path, data))


def test_selecting_every_target_leaves_no_retain_and_says_so(tmp_path, rwku_data_dir):
    with pytest.raises(DataError, match="select fewer targets"):
        _records(_cfg(tmp_path, rwku_data_dir, rwku_target=["1-3"]))


def _nll(model, tok, texts):
    with torch.no_grad():
        total = 0.0
        for text in texts:
            ids, labels = encode_text(tok, text)[0]
            out = model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels]))
            total += float(out.loss)
    return total / len(texts)


def test_gradient_ascent_on_the_positive_corpus_raises_the_targets_text_loss(tmp_path, rwku_data_dir, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    texts = [r["text"] for r in corpus()["train_positive_llama3"] if r["subject"] == ORLA]
    before = _nll(AutoModelForCausalLM.from_pretrained(tiny_model_dir), tok, texts)
    cfg = _cfg(tmp_path, rwku_data_dir, method="ga", model=tiny_model_dir, epochs=2, lr=1e-2, batch_size=2,
               lora=False, progress=False)
    trained = train(cfg)
    after = _nll(AutoModelForCausalLM.from_pretrained(trained.out), tok, texts)
    assert after > before + 0.5
    saved = (trained.out / "unlearn_config.yaml").read_text()
    assert "rwku_target:\n- Orla Venn" in saved and "forget: train_positive_llama3" in saved


def test_dpo_trains_on_the_pair_corpus(tmp_path, rwku_data_dir, tiny_model_dir):
    trained = train(_cfg(tmp_path, rwku_data_dir, method="dpo", model=tiny_model_dir, epochs=1, batch_size=2,
                         progress=False))
    history = json.loads((trained.out / "train_metrics.json").read_text())["log_history"]
    assert any("dpo" in row for row in history)


def test_cli_names_an_unknown_target_and_exits_2(tmp_path, rwku_data_dir, tiny_model_dir):
    proc = run_command(["unlearn", "run", "--model", str(tiny_model_dir), "--out", str(tmp_path / "o"), "--data",
                        "rwku", "--data-dir", str(rwku_data_dir), "--target", "Tobias Quarel"])
    assert proc.returncode == 2
    assert "'Tobias Quarel' is not a target" in proc.stderr and "did you mean 'Tobias Quarrel'" in proc.stderr
