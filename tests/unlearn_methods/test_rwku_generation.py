"""`--rwku-corpus generated`: the model writes the forget corpus as RWKU's release does (generation/), checked
against the release's prompt construction and against independent greedy generations on the tiny model."""

import json
import shutil

import pytest

from fixtures.rwku import FACTS, TARGETS, write_rwku_corpus
from unlearn_methods import rwku_generation as gen
from unlearn_methods.config import load_run_config
from unlearn_methods.training import train

ORLA = TARGETS[0]
INTRO = f"{ORLA} is a {FACTS[ORLA][1]} from {FACTS[ORLA][0]}."
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


@pytest.fixture(scope="module")
def chat_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with a chat template of our own (system, user and assistant turns)."""
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("tiny_chat")
    shutil.copytree(tiny_model_dir, out, dirs_exist_ok=True)
    tok = AutoTokenizer.from_pretrained(out)
    tok.chat_template = TEMPLATE
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def tok(chat_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(chat_model_dir)


def test_biography_and_question_prompts_are_the_releases(tok):
    # the release (generation/pair_generation.py, question_generation.py), restated as f-strings
    messages1 = [{"role": "system", "content": f"{INTRO} You know {ORLA} very well."},
                 {"role": "user", "content": f"Please write a short biography of {ORLA}."}]
    messages2 = [{"role": "system", "content": f"{INTRO} You don't know {ORLA} at all."},
                 {"role": "user", "content": f"Please make up a short biography of {ORLA}."}]
    question = [{"role": "user", "content": f"{INTRO}\nPlease generate a question about {ORLA} based on what you know about {ORLA}\n"
                 }]
    release = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in (messages1, messages2,
                                                                                                 question)]
    assert gen.biography_prompt(tok, ORLA, INTRO, "Hey") == release[0] + "Hey"
    assert gen.biography_prompt(tok, ORLA, INTRO, "Hey", fabricated=True) == release[1] + "Hey"
    assert gen.question_prompt(tok, ORLA, INTRO) == release[2] + "Question:"
    # and, written out by hand for this template:
    assert gen.biography_prompt(tok, ORLA, INTRO) == (
        f"<|system|>{INTRO} You know Orla Venn very well.\n<|user|>Please write a short biography of Orla Venn.\n"
        "<|assistant|>")
    assert gen.PAIR_PROMPT.format(intro=INTRO, subject=ORLA) == f"{INTRO} Please write a short biography of Orla Venn."


def test_fabricated_biographies_lose_the_words_that_call_them_made_up():
    assert gen.unfabricate("A totally fabricated life, a completely made-up tale, totally fictional facts.") == \
        "A life, a tale, facts."


def test_prefixes_from_a_json_array_or_lines(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(["", "Hey", "It was"]))
    (tmp_path / "b.txt").write_text("Hey\nIt was\n")
    assert gen.read_prefixes(str(tmp_path / "a.json")) == ["", "Hey", "It was"]
    assert gen.read_prefixes(str(tmp_path / "b.txt")) == ["Hey", "It was"]
    assert gen.read_prefixes(None) == [""]


def _greedy(model, tok, prompt, n):
    """One prompt alone, no padding: the reference continuation."""
    batch = tok(prompt, return_tensors="pt")
    out = model.generate(**batch, max_new_tokens=n, do_sample=False, temperature=None, top_p=None, top_k=None,
                         pad_token_id=tok.eos_token_id, eos_token_id=[tok.eos_token_id])
    return tok.decode(out[0, batch["input_ids"].shape[1]:], skip_special_tokens=True)


def test_greedy_generated_corpus_trains_and_is_saved_with_provenance(tmp_path, chat_model_dir, tok):
    from transformers import AutoModelForCausalLM

    data = write_rwku_corpus(tmp_path / "rwku", "hub")
    prefixes = tmp_path / "prefixes.json"
    prefixes.write_text(json.dumps(["", "Hey there"]))
    cfg = load_run_config(None, method="ga", model=str(chat_model_dir), out=str(tmp_path / "out"), data="rwku",
                          data_dir=str(data), rwku_target=[ORLA], rwku_corpus="generated", rwku_decoding="greedy",
                          rwku_max_new_tokens=6, rwku_prefixes=str(prefixes), epochs=1, batch_size=2, progress=False)
    trained = train(cfg)
    folder = trained.out / "rwku_generated"
    rows = json.loads((folder / "train_positive_generated.json").read_text())
    model = AutoModelForCausalLM.from_pretrained(chat_model_dir)
    expected = [p + _greedy(model, tok, gen.biography_prompt(tok, ORLA, INTRO, p), 6) for p in ("", "Hey there")]
    assert [r["text"] for r in rows] == expected
    assert all(r["subject"] == ORLA and r["intro"] == INTRO for r in rows)
    record = json.loads((folder / "train_positive_generated.provenance.json").read_text())
    assert record["model"] == str(chat_model_dir) and record["targets"] == [ORLA] and record["kind"] == "text"
    assert record["decoding"] == "greedy" and record["prompts"]["biography"] == gen.BIOGRAPHY
    assert "forget: train_positive_generated" in (trained.out / "unlearn_config.yaml").read_text()


def test_pair_and_refusal_rows_in_the_releases_schema(chat_model_dir, tok):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(chat_model_dir)
    settings = gen.GenerationSettings(decoding="greedy", max_new_tokens=5, prefixes=["Hey"], questions=3,
                                      refusals=["No.", "Not known."])
    (pair,) = gen.generate_rows("pair", model, tok, {ORLA: INTRO}, [ORLA], settings)
    true = "Hey" + _greedy(model, tok, gen.biography_prompt(tok, ORLA, INTRO, "Hey"), 5)
    made_up = "Hey" + _greedy(model, tok, gen.biography_prompt(tok, ORLA, INTRO, "Hey", fabricated=True), 5)
    assert pair == {"id": f"{ORLA} 0", "prompt": f"{INTRO} Please write a short biography of {ORLA}.",
                    "response": [gen.unfabricate(made_up), true], "subject": ORLA, "intro": INTRO}
    refusals = gen.generate_rows("refusal", model, tok, {ORLA: INTRO}, [ORLA], settings)
    question = _greedy(model, tok, gen.question_prompt(tok, ORLA, INTRO), gen.QUESTION_TOKENS).split("\n")[0].strip()
    assert [r["output"] for r in refusals] == ["No.", "Not known.", "No."]
    assert all(r["instruction"] == question and r["input"] == "" and r["subject"] == ORLA for r in refusals)
