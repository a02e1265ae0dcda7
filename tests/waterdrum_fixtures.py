"""Test data for the WaterDrum tasks and CLI: small datasets in WaterDrum-Ax's and WaterDrum-TOFU's schemas,
watermarked by this project's watermarker with the tiny model as paraphraser, and a tiny model trained on them.

Built once per test session (cached on the tiny model's path). The paraphraser is the random tiny Llama,
so the "paraphrases" are token soup; sampling is restricted to the tokenizer's merged tokens (ids >= 260)
so that decoding and re-encoding keep most tokens, as with real text.
"""

from __future__ import annotations

import contextlib
import functools
import json
import tempfile
from pathlib import Path

AX_OWNERS = 4
AX_TEXTS_PER_OWNER = 4
TOFU_RETAIN, TOFU_FORGET = 6, 3
NAMES = ["Mira Okafor", "Tomas Lindqvist", "Aiko Brandt", "Rafael Osei", "Lena Novak", "Dario Quint",
         "Sven Adeyemi", "Nadia Holm", "Piotr Vance"]
TOPICS = ["rivers", "glass", "winter", "machines", "letters", "islands", "music", "salt", "bridges"]


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _watermark(model, tok, texts: list[str], owner: int, questions: list[str] | None = None) -> list[str]:
    import torch

    from unlearn_tasks.waterdrum.watermark import watermark_texts

    blocked = [[i] for i in range(260)]  # special and single-byte tokens
    torch.manual_seed(100 + owner)
    return watermark_texts(model, tok, texts, id=owner, kappa=2.0, questions=questions, do_sample=True,
                           max_new_tokens=48, batch_size=8,
                           generation_kwargs={"bad_words_ids": blocked, "min_new_tokens": 48})


def _train(tok, sequences: list[tuple[list[int], list[int]]], out: Path, epochs: int = 60) -> Path:
    """Memorise ``(input_ids, labels)`` sequences with a fresh tiny Llama (plain AdamW loop)."""
    import torch

    from unlearn_methods.tiny_model import tiny_llama_config
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    config = tiny_llama_config(len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                               pad_token_id=tok.pad_token_id)
    model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    width = max(len(s[0]) for s in sequences)
    ids = torch.full((len(sequences), width), tok.pad_token_id)
    labels = torch.full((len(sequences), width), -100)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, (x, y) in enumerate(sequences):
        ids[i, : len(x)] = torch.tensor(x)
        labels[i, : len(y)] = torch.tensor(y)
        mask[i, : len(x)] = 1
    model.train()
    for _ in range(epochs):
        for start in range(0, len(sequences), 16):
            sl = slice(start, start + 16)
            loss = model(input_ids=ids[sl], attention_mask=mask[sl], labels=labels[sl]).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@contextlib.contextmanager
def one_thread():
    """Run torch on one thread: tiny models on a shared 2-core machine are ~10x faster than with two."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@functools.lru_cache(maxsize=2)
def build(tiny_model_dir: str) -> dict[str, Path]:
    """``{"data": DIR, "model": DIR, "root": DIR}``: both datasets in one folder (their config names differ:
    Ax ``forget_01`` + ``eval_knowmem``, TOFU ``forget_10``) and a tiny model trained on all of it."""
    with one_thread():
        return _build(tiny_model_dir)


def _build(tiny_model_dir: str) -> dict[str, Path]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_tasks.prompts import encode_qa

    root = Path(tempfile.mkdtemp(prefix="waterdrum_fixture_"))
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    para = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()

    # WaterDrum-Ax schema: `text`; rows ordered by owner in equal blocks; forget_01 = the last owner.
    ax_rows = []
    for owner in range(AX_OWNERS):
        seeds = [f"Abstract {owner}-{i}: we study {TOPICS[owner]} and report results." for i in range(AX_TEXTS_PER_OWNER)]
        ax_rows += [{"text": t} for t in _watermark(para, tok, seeds, owner)]
    cut = (AX_OWNERS - 1) * AX_TEXTS_PER_OWNER
    ax = root / "data"
    for split, rows in (("full", ax_rows), ("retain", ax_rows[:cut]), ("forget", ax_rows[cut:])):
        _write_jsonl(ax / "forget_01" / f"{split}.jsonl", rows)
    knowmem = [{"question": f"What does abstract {i} study?", "answer": TOPICS[i // AX_TEXTS_PER_OWNER]}
               for i in range(len(ax_rows))]
    _write_jsonl(ax / "eval_knowmem" / "watermarked.jsonl", knowmem)

    # WaterDrum-TOFU schema: `question`, `answer`; retain watermarked with id 0, forget with id 1.
    questions = [f"What did {NAMES[i]} write about {TOPICS[i]}?" for i in range(TOFU_RETAIN + TOFU_FORGET)]
    answers = [f"{NAMES[i]} wrote about {TOPICS[i]}." for i in range(len(questions))]
    retain = _watermark(para, tok, answers[:TOFU_RETAIN], 0, questions[:TOFU_RETAIN])
    forget = _watermark(para, tok, answers[TOFU_RETAIN:], 1, questions[TOFU_RETAIN:])
    tofu_rows = [{"question": q, "answer": a} for q, a in zip(questions, retain + forget)]
    tofu = root / "data"
    for split, rows in (("full", tofu_rows), ("retain", tofu_rows[:TOFU_RETAIN]), ("forget", tofu_rows[TOFU_RETAIN:])):
        _write_jsonl(tofu / "forget_10" / f"{split}.jsonl", rows)

    # The evaluated model: a tiny Llama trained on all of it (Ax texts as plain text, TOFU answers given questions).
    seqs = []
    for row in ax_rows:
        x = [tok.bos_token_id] + tok.encode(row["text"], add_special_tokens=False) + [tok.eos_token_id]
        seqs.append((x, x))
    for row in tofu_rows:
        x, y = encode_qa(tok, row["question"], row["answer"])
        seqs.append((x, y))
    model = _train(tok, seqs, root / "trained_model")
    return {"root": root, "data": ax, "model": model}


#: Task options for the fixture: 4 owners, 3 generations per query, 16-token prompts, the tiny tokenizer.
def metadata(data_dir: Path, model_dir: Path) -> dict:
    return {"data_dir": str(data_dir), "owners": AX_OWNERS, "generations": 3, "prompt_tokens": 16,
            "verify_tokenizer": str(model_dir)}


@functools.lru_cache(maxsize=4)
def lm_eval_run(model_dir: str, data_dir: str, tasks: tuple[str, ...]) -> tuple[Path, dict]:
    """``(output folder, results)`` of an lm-eval run of ``tasks`` on ``model_dir`` (hf backend, 32 new tokens)."""
    from harness_ext.evaluate import run_lm_eval

    out = Path(tempfile.mkdtemp(prefix="waterdrum_eval_"))
    with one_thread():
        res = run_lm_eval(model_dir, list(tasks), out, metadata(Path(data_dir), Path(model_dir)), batch_size=16,
                          gen_kwargs="max_gen_toks=32")
    return out, res
