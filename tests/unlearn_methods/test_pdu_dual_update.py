"""PDU's dual variable under the Trainer: once per epoch with ``dual_update=epoch`` (open-unlearning's
``dual_update_upon: epoch``), on the mean retain NLL of a pass over the training batches, at the end of each epoch
past the warm-up; once per optimiser step by default."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments

from unlearn_methods import get_method
from unlearn_methods.base import UnlearnTrainer
from unlearn_methods.forget_retain import ForgetRetainDataset, PairCollator, load_qa


@pytest.fixture(scope="module")
def setup(tiny_model_dir, demo_data_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    data = ForgetRetainDataset(load_qa("forget01", data_dir=str(demo_data_dir)),
                               load_qa("retain99", data_dir=str(demo_data_dir)), tok, ["I don't know."])
    collate = PairCollator(tok.pad_token_id)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    with torch.no_grad():  # the retain NLL of the one batch (the whole set), by hand: the model's own loss
        retain = collate([data[i] for i in range(len(data))])["retain"]
        nll = float(model(**{k: retain[k] for k in ("input_ids", "attention_mask", "labels")}).loss)
    return tiny_model_dir, tok, data, nll


def _dual_after(setup, tmp_path, epochs: int, **params) -> float:
    model_dir, tok, data, _ = setup
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True, per_device_train_batch_size=len(data),
                             num_train_epochs=epochs, learning_rate=1e-12, save_strategy="no", disable_tqdm=True,
                             remove_unused_columns=False, logging_steps=1)
    method = get_method("pdu", {"alpha": 1.0, "retain_eps": 0.3, "dual_step_size": 1.0, **params})
    UnlearnTrainer(model=model, args=args, method=method, train_dataset=data,
                   data_collator=PairCollator(tok.pad_token_id)).train()
    return method.dual


def test_dual_moves_once_per_epoch_after_the_warm_up(setup, tmp_path):
    nll = setup[3]
    assert nll > 0.3
    # one batch per epoch, weights unchanged at lr 1e-12: every pass sees the same retain NLL. Warm-up 1.5 epochs:
    # the end of epoch 2 alone moves lambda (per step it would not move: epoch 2's step starts at epoch 1.0 < 1.5;
    # without the warm-up it would move twice)
    assert _dual_after(setup, tmp_path, 2, dual_update="epoch", dual_warmup_epochs=1.5) == pytest.approx(
        1.0 + (nll - 0.3), rel=1e-5)
    assert _dual_after(setup, tmp_path, 2, dual_warmup_epochs=1.5) == 1.0  # per step: still inside the warm-up
