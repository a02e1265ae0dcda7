"""Unlearning on raw text (MUSE's corpora): chunking, loading, pairing, and every method whose loss applies to
plain text training on the MUSE fixture; the QA-only methods are refused with a message."""


import pytest
import torch

from fixtures.method_trends import assert_trends
from unlearn_methods import all_methods
from unlearn_methods.config import load_run_config
from unlearn_methods.forget_retain import PairCollator, TextForgetRetainDataset, load_texts
from unlearn_methods.training import UnlearningFailed, train
from unlearn_tasks.dataset_loader import DataError
from unlearn_tasks.prompts import encode_text

QA_ONLY_METHODS = sorted(name for name, cls in all_methods().items() if cls.qa_only)
TEXT_METHODS = sorted(set(all_methods()) - set(QA_ONLY_METHODS))


@pytest.fixture(scope="module")
def tok(muse_tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(muse_tiny_model_dir)


def test_encode_text_chunks_after_the_prefix_token(tok):
    text = "The town of Arlow opened a new library in January."
    ids = tok.encode(text, add_special_tokens=False)
    assert len(ids) > 5
    (whole,) = encode_text(tok, text)
    assert whole == ([tok.bos_token_id, *ids], [-100, *ids])
    chunks = encode_text(tok, text, max_length=4)
    assert [c[0] for c in chunks] == [[tok.bos_token_id, *ids[i : i + 3]] for i in range(0, len(ids), 3)]
    assert all(c[1][0] == -100 and c[1][1:] == c[0][1:] for c in chunks)


def test_load_texts_by_split_or_config_and_split(muse_data_dir):
    forget = load_texts("forget", "muse-bench/MUSE-News", str(muse_data_dir))
    assert len(forget) == 4 and forget[0]["text"].startswith("The town of Arlow")
    assert len(load_texts("privleak/holdout", "muse-bench/MUSE-News", str(muse_data_dir))) == 6
    with pytest.raises(DataError, match="forget10"):
        load_texts("forget10", "muse-bench/MUSE-News", str(muse_data_dir))


def test_text_pairs_collate_forget_and_retain_only(tok, muse_data_dir):
    forget = load_texts("forget", "x", str(muse_data_dir))
    retain = load_texts("retain1", "x", str(muse_data_dir))
    ds = TextForgetRetainDataset(forget, retain, tok, seed=0, max_length=16)
    assert len(ds) == sum(len(encode_text(tok, r["text"], 16)) for r in forget)
    batch = PairCollator(tok.pad_token_id)([ds[0], ds[1]])
    assert set(batch) == {"forget", "retain"} and batch["forget"]["input_ids"].shape[1] <= 16


def _cfg(tmp_path, model_dir, data_dir, method, epochs=1, **kw):
    params = {"reinforce_epochs": 2} if method in ("task_vector", "whp") else {}
    if method == "scrub":  # a short run: every step a 'max' step, so the forget KL is logged and moves
        params = {"max_every": 1, "max_fraction": 1.0}
    return load_run_config(None, method=method, model=str(model_dir), out=str(tmp_path / method), data="muse_news",
                           data_dir=str(data_dir), forget="forget", epochs=epochs, batch_size=4, lr=1e-3, progress=False,
                           method_params=params, **kw)


@pytest.fixture(scope="module")
def muse_memorised(muse_tiny_model_dir, tmp_path_factory):
    """The tiny MUSE model fine-tuned on the fixture's passages: there is something to forget."""
    from fixtures.muse import memorise

    out = tmp_path_factory.mktemp("muse_memorised")
    memorise(muse_tiny_model_dir, out, epochs=30)
    return out


@pytest.mark.parametrize("method", TEXT_METHODS)
def test_every_plain_text_method_trains_on_muse(method, tmp_path, muse_memorised, muse_data_dir):
    """Each method trains on raw text and its loss terms move the way the method says (not only 'it ran')."""
    muse_tiny_model_dir = muse_memorised
    trained = train(_cfg(tmp_path, muse_tiny_model_dir, muse_data_dir, method, epochs=3))
    assert (trained.out / "unlearn_config.yaml").is_file()
    assert any(trained.out.glob("*.safetensors"))
    config = (trained.out / "unlearn_config.yaml").read_text()
    assert "retain: retain1" in config and "data: muse_news" in config
    assert_trends(trained.out, method)
    if method == "task_vector":  # no training loop: the weights moved away from the original
        from transformers import AutoModelForCausalLM

        before, after = (AutoModelForCausalLM.from_pretrained(d).state_dict() for d in (muse_tiny_model_dir, trained.out))
        assert before.keys() == after.keys()
        assert any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("method", QA_ONLY_METHODS)
def test_question_methods_are_refused_on_raw_text(method, tmp_path, muse_tiny_model_dir, muse_data_dir):
    with pytest.raises(UnlearningFailed, match=f"the {method} loss needs questions"):
        train(_cfg(tmp_path, muse_tiny_model_dir, muse_data_dir, method))
