"""The reference's per-example values (NPO, DPO, AltPO: its summed answer NLL of a row) are computed once before
training and carried with each row (:mod:`unlearn_methods.reference`): the values are the reference's NLL of each
row, a run with them ends in the weights and logs the losses of a run that runs the reference forward at every step
(today's path, kept here as a method declaring ``needs_reference`` without ``reference_nll``), no reference copy is
made, and ``--resume`` reads the saved values instead of recomputing them."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch
import transformers

from fixtures.weights import logged_losses, update_difference
from unlearn_methods import get_method, reference
from unlearn_methods.checkpoint_folder import partial_path
from unlearn_methods.config import load_run_config
from unlearn_methods.forget_retain import ForgetRetainDataset, PairCollator
from unlearn_methods.idk import IDK_ANSWERS
from unlearn_methods.losses import REF_NLL_KEY, forward, sequence_nll
from unlearn_methods.scaffolding.tofu_corpus import build_corpus
from unlearn_methods.training import UnlearningFailed, train

PAIRS = {"npo": ("forget",), "dpo": ("forget_idk", "forget"), "altpo": ("forget_alternate", "forget")}
#: The weight updates' relative L2 difference of two runs whose losses agree to float summation order (1e-7): a row's
#: reference NLL scored in another batch (another padding width, another first answer position) sums in another
#: order, and AdamW's first steps move each weight by about lr * sign(gradient), so gradients at float noise level
#: flip their weights' updates (SmolLM2: 6.8e-3 after 2 steps between two mathematically equal loss codes).
UPDATES_EQUAL = 1e-4


def _alternates(tmp_path):
    path = tmp_path / "alts.jsonl"
    path.write_text("".join(json.dumps({"question": r["question"], "alternate": f"It is not {r['answer']}"}) + "\n"
                            for r in build_corpus()["forget01"]))
    return str(path)


def _cfg(tmp_path, model_dir, data_dir, method, name, lora, **kw):
    params = {"alternates_file": _alternates(tmp_path)} if method == "altpo" else {}
    base = dict(method=method, model=str(model_dir), out=str(tmp_path / name), data_dir=str(data_dir),
                forget="forget01", epochs=2, batch_size=4, lr=1e-3 if not lora else 1e-2, lora=lora, progress=False,
                seed=5, method_params=params, max_length=64)
    return load_run_config(None, **{**base, **kw})


def _per_step(name: str):
    """The method as it ran before: the reference run forward on every batch (a copy for full fine-tuning)."""
    cls = type(get_method(name))
    return type(f"PerStep{cls.__name__}", (cls,), {"needs_reference": True, "reference_nll": ()})


@pytest.fixture
def model_copies(monkeypatch):
    """How many times a model is deep-copied (the reference copy of full fine-tuning)."""
    made = []
    original = copy.deepcopy

    def counting(obj, *args, **kwargs):
        if isinstance(obj, torch.nn.Module):
            made.append(type(obj).__name__)
        return original(obj, *args, **kwargs)

    monkeypatch.setattr(copy, "deepcopy", counting)
    return made


def _history(out):
    return [row for row in json.loads((out / "train_metrics.json").read_text())["log_history"] if "loss" in row]


def test_the_values_are_each_rows_reference_nll(tiny_model_dir):
    """Computed in batches of 4 (rows padded together), each value is the NLL of the row scored alone, by hand."""
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    corpus = build_corpus()
    data = ForgetRetainDataset(corpus["forget05"], corpus["retain95"], tokenizer, IDK_ANSWERS, seed=1)
    collator = PairCollator(tokenizer.pad_token_id)
    model.train()
    values = reference.compute(model, data, collator, ("forget_idk", "forget"), batch_size=4)
    assert model.training  # put back as it was
    assert set(values) == {"forget_idk", "forget"} and all(v.shape == (len(data),) for v in values.values())
    model.eval()
    for k in range(len(data)):
        for part in values:
            row = data[k][part]
            ids, labels = torch.tensor([row["input_ids"]]), torch.tensor([row["labels"]])
            with torch.no_grad():
                logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].double(), -1)
            answer = labels[0, 1:] != -100
            by_hand = -logp[answer, labels[0, 1:][answer]].sum()
            assert float(values[part][k]) == pytest.approx(float(by_hand), rel=1e-5)
    # carried with its row whatever order the sampler draws rows in
    wrapped, carrying = reference.WithReference(data, values), reference.ReferenceCollator(collator)
    order = [7, 2, 11]
    batch = carrying([wrapped[k] for k in order])
    for part in values:
        assert torch.equal(batch[part][REF_NLL_KEY], values[part][order])
        assert torch.equal(batch[part]["input_ids"], collator([data[k] for k in order])[part]["input_ids"])
        with torch.no_grad():
            nll, _ = sequence_nll(forward(model, batch[part]).logits, batch[part]["labels"])
        assert torch.allclose(nll, batch[part][REF_NLL_KEY], rtol=1e-5)
    assert REF_NLL_KEY not in batch["retain"]


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("method", sorted(PAIRS))
def test_a_run_with_the_values_computed_once_is_the_run_with_a_reference_forward_per_step(
        method, lora, tiny_model_dir, demo_data_dir, tmp_path, monkeypatch, model_copies):
    """forget01 (6 rows, steps of 4 and 2), 2 epochs: the same losses, terms and weights as the per-step path, and
    no reference copy of the model."""
    once = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, method, "once", lora)).out
    assert model_copies == []
    saved = json.loads((once / "train_metrics.json").read_text())["reference_nll"]
    assert saved["file"] == reference.REFERENCE_FILE and saved["computed"] is True
    record = json.loads((once / reference.REFERENCE_FILE).read_text())
    assert sorted(record["values"]) == sorted(PAIRS[method]) and record["values_sha256"] == saved["values_sha256"]
    assert all(len(v) == 6 for v in record["values"].values())

    monkeypatch.setattr("unlearn_methods.training.get_method", lambda name, params: _per_step(name)(params))
    per_step = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, method, "per_step", lora)).out
    assert model_copies == ([] if lora else ["LlamaForCausalLM"])  # LoRA: the adapter switched off, no copy
    assert not (per_step / reference.REFERENCE_FILE).exists()

    difference, update = update_difference(tiny_model_dir, per_step, once)
    assert update > 1e-3 and difference <= UPDATES_EQUAL
    a, b = _history(per_step), _history(once)
    assert len(a) == 4 and [r.keys() for r in a] == [r.keys() for r in b]
    for row_a, row_b in zip(a, b):
        for key, value in row_a.items():
            assert row_b[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key


def test_npo_with_a_kl_retain_term_keeps_the_reference_for_it(tiny_model_dir, demo_data_dir, tmp_path, monkeypatch,
                                                            model_copies):
    """retain_loss=kl needs the reference per token: the copy is kept, the forget term still uses the values."""
    kw = {"method_params": {"retain_loss": "kl"}, "epochs": 1}
    once = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "npo", "once", False, **kw)).out
    assert model_copies == ["LlamaForCausalLM"] and (once / reference.REFERENCE_FILE).is_file()
    monkeypatch.setattr("unlearn_methods.training.get_method", lambda name, params: _per_step(name)(params))
    per_step = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "npo", "per_step", False, **kw)).out
    difference, update = update_difference(tiny_model_dir, per_step, once)
    assert update > 1e-3 and difference <= UPDATES_EQUAL
    assert logged_losses(once) == pytest.approx(logged_losses(per_step), rel=1e-5)


def test_resume_reads_the_saved_values_and_refuses_altered_ones(tiny_model_dir, demo_data_dir, tmp_path, monkeypatch):
    """1 epoch, then --resume to 2: the values are read from the run's file (computing them would fail here) and
    the weights are those of 2 epochs uninterrupted; a file whose values were altered is refused in one line."""
    whole = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "npo", "whole", False)).out
    first = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "npo", "resumed", False, epochs=1)).out
    computed = json.loads((first / "train_metrics.json").read_text())["reference_nll"]

    def no_compute(*args, **kwargs):
        raise AssertionError("recomputed on --resume")

    monkeypatch.setattr(reference, "compute", no_compute)
    resumed = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "npo", "resumed", False, resume=True)).out
    read = json.loads((resumed / "train_metrics.json").read_text())["reference_nll"]
    assert read == {**computed, "computed": False}
    difference, _ = update_difference(tiny_model_dir, whole, resumed)
    assert difference <= 1e-5

    path = resumed / reference.REFERENCE_FILE
    record = json.loads(path.read_text())
    record["values"]["forget"][0] += 1.0
    path.write_text(json.dumps(record))
    with pytest.raises(UnlearningFailed, match=r"^--resume: reference_nll\.json was altered .* start afresh"):
        train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "npo", "resumed", False, resume=True, epochs=3))
    record["values"]["forget"][0] -= 1.0
    record["rows_sha256"] = "0" * 64
    path = partial_path(resumed) / reference.REFERENCE_FILE  # the stopped resume left the run in OUT.partial
    path.write_text(json.dumps(record))
    with pytest.raises(UnlearningFailed, match=r"holds the reference values of other training rows"):
        train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "npo", "resumed", False, resume=True, epochs=3))


def test_eval_every_evaluates_the_training_model_without_loading_another(tiny_model_dir, demo_data_dir, tmp_path,
                                                                        monkeypatch, model_copies):
    """NPO, full fine-tuning, lm-eval every 2 steps: the model is loaded once (for training) and never copied."""
    loads = []
    original = transformers.PreTrainedModel.from_pretrained.__func__

    def counting(cls, *args, **kwargs):
        loads.append(cls.__name__)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(transformers.PreTrainedModel, "from_pretrained", classmethod(counting))
    out = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "npo", "eval", False, epochs=1, batch_size=2,
                     eval_every=2, eval_limit=2, eval_tasks=["tofu_forget01_likelihood"])).out
    rows = [json.loads(line) for line in (out / "eval_during_training.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 2, 3]
    assert loads == ["LlamaForCausalLM"] and model_copies == []


def _rows(labels: list[int]) -> list[dict]:
    """Two training rows of one part, the second's labels (its answer mask) given."""
    return [{"forget": {"input_ids": [5, 6, 7], "labels": [-100, 6, 7]}},
            {"forget": {"input_ids": [5, 8, 9], "labels": labels}}]


def test_the_rows_digest_covers_the_answer_mask_so_a_changed_mask_is_not_resumed(tmp_path):
    """Same token ids, one more prompt token masked: other rows, so the saved values are refused (not reused)."""
    rows, masked = _rows([-100, 8, 9]), _rows([-100, -100, 9])
    digest = reference.rows_digest(rows, ("forget",))
    assert reference.rows_digest(masked, ("forget",)) != digest
    path = tmp_path / reference.REFERENCE_FILE
    reference.write(path, {"forget": torch.tensor([1.5, 2.5])}, digest)
    assert reference.read(path, ("forget",), digest, 2)["forget"].tolist() == [1.5, 2.5]
    with pytest.raises(reference.ReferenceValuesError, match="holds the reference values of other training rows"):
        reference.read(path, ("forget",), reference.rows_digest(masked, ("forget",)), 2)


UNUSABLE = {
    "nested 100k deep": r"reference_nll\.json is nested too deeply to read as JSON; remove it to recompute",
    "a folder": r"reference_nll\.json is not a regular file \(a folder\); remove it",
    "a link": r"reference_nll\.json is not a regular file \(a link\); remove it",
    "a NaN, re-sealed": r"reference_nll\.json holds a non-finite value for row 1 of forget \(nan\); remove it",
    "-inf, re-sealed": r"reference_nll\.json holds a non-finite value for row 0 of forget \(-inf\); remove it",
    "a 5000-digit number": r"reference_nll\.json holds a number of more than \d+ digits; remove it",
}


@pytest.mark.parametrize("case", sorted(UNUSABLE))
def test_resume_refuses_unusable_reference_values_in_one_line(case, tmp_path):
    """Read through the resume's own path (:func:`reference.attach` with ``resume``): refused before any
    computation, never trained on; a folder is not taken for a missing file (which would recompute, then crash)."""
    rows = _rows([-100, 8, 9])
    digest = reference.rows_digest(rows, ("forget",))
    path = tmp_path / reference.REFERENCE_FILE
    if case == "nested 100k deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif case == "a folder":
        path.mkdir()
    elif case == "a link":
        reference.write(tmp_path / "elsewhere.json", {"forget": torch.tensor([1.0, 2.0])}, digest)
        path.symlink_to(tmp_path / "elsewhere.json")
    elif case == "a 5000-digit number":
        path.write_text('{"values": {"forget": [' + "9" * 5000 + ', 1]}}')
    else:
        bad = [1.0, math.nan] if "NaN" in case else [-math.inf, 1.0]
        reference.write(path, {"forget": torch.tensor(bad)}, digest)  # values_sha256 computed over them: sealed

    def no_compute(*args, **kwargs):
        raise AssertionError("recomputed instead of refused")

    model = torch.nn.Linear(1, 1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reference, "compute", no_compute)
        with pytest.raises(reference.ReferenceValuesError, match=UNUSABLE[case]) as e:
            reference.attach(model, rows, None, ("forget",), 2, out=tmp_path, resume=True)
    assert "\n" not in str(e.value)
