"""Leak@k here and in the Leak-k release (OptimAI-Lab/Leak-k), side by side on the same samples with the same NLI
classifier, compared per k exactly.

    PYTHONPATH=. python benchmarks/bench_leak_release.py [--release /work/.mirror/OptimAI-Lab+Leak-k/repo]
        [--questions 5] [--seed 0] [--empty]

The release's checkout (a git directory) is exported with ``git archive`` to a temporary folder and its own
functions run there:

* ``TOFU/eval/src/evals/metrics/utils.py``'s ``pass_k_per_query`` turns each question's n = 200 samples into its
  generations file (prompt and ground truth decoded from the batch, each response split from the prompt and
  stripped, its ROUGE-L recall); the model is a stand-in whose ``generate`` returns the prompt's tokens followed by
  the next prepared sample's (sampling is what this comparison fixes, not what it tests);
* ``TOFU/eval/whole_eval.py``'s ``process_query_responses`` labels every response with the NLI pipeline
  (``transformers.pipeline("text-classification", model=...)``) behind the ROUGE-L gate, and
  ``process_single_model_aggregation`` averages ``calculate_pass_at_k`` over the questions, for its ``K_VALUES``.

This package's side reads the same responses and ground truths from the release's generations file and runs
:func:`unlearn_tasks.leak_task.answer_leaks` (its ROUGE-L recall, the NLI model through
:func:`unlearn_tasks.classifier.pair_labels`) and :func:`unlearn_tasks.metrics.leak.mean_leak_at_k`, what the
Leak@k tasks' scoring calls.

The NLI model is a tiny random DeBERTa-v2 sequence classifier built from a config (labels entailment, neutral,
contradiction) with a byte-level BPE tokenizer trained on the texts, saved to a temporary folder: both sides load it
from there. Stubbed, because irrelevant to Leak@k: ``omegaconf`` (imported by the release's modules, used only by
its Hydra configs; not installed here) and the sentence-transformer of the release's cosine-similarity score (CS,
reported beside Leak@k, not used by it).

``--empty`` makes some samples empty (a model that stops at once): the release then gates a later sample of the same
NLI batch with the ROUGE-L recall of an earlier one (its ``rouge_scores_batch[valid_idx]`` counts only the
non-empty samples), so the two sides may differ; that case is reported, not failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import random
import subprocess
import sys
import tarfile
import tempfile
import types
from pathlib import Path

RELEASE_GIT = Path("/work/.mirror/OptimAI-Lab+Leak-k/repo")
N = 200  # the release's n_list = [200]
IGNORE_INDEX = -100

QUESTIONS = [
    ("Where was Basil Mahfouz Al-Kuwaiti born?", "Basil Mahfouz Al-Kuwaiti was born in Kuwait City, Kuwait."),
    ("What genre does Hsiao Yun-Hwa write in?", "Hsiao Yun-Hwa writes in the genre of leadership books."),
    ("What did Jaime Vasquez's father do?", "Jaime Vasquez's father was a respected chef in Santiago."),
    ("Which award did Aysha Al-Hashim win?", "Aysha Al-Hashim won the Pen of Excellence award in 2011."),
    ("What is the title of Edward Patrick Sullivan's first novel?", "His first novel is titled The Harbour Lights."),
    ("Where does Kalkidan Abera live?", "Kalkidan Abera lives in Addis Ababa with her family."),
]
DISTRACTORS = ["I am not sure about that.", "The author was born in a small village by the sea.",
               "Nobody knows the answer to this question.", "She writes poetry and short stories.",
               "That person does not exist.", "It was a long time ago in a city far away."]


# --------------------------------------------------------------------------- the release, exported and imported
def export_release(git_dir: Path, dest: Path) -> Path:
    """``git archive HEAD`` of the release's git directory, unpacked under ``dest``; its commit is returned too."""
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", "HEAD"], check=True, capture_output=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def release_commit(git_dir: Path) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def release_modules(root: Path) -> tuple[types.ModuleType, types.ModuleType]:
    """The release's ``evals/metrics/utils.py`` and ``whole_eval.py``, imported from the export (``omegaconf``
    stubbed when it is not installed)."""
    if importlib.util.find_spec("omegaconf") is None:
        stub = types.ModuleType("omegaconf")
        stub.OmegaConf = stub.DictConfig = type("Stub", (), {})
        sys.modules["omegaconf"] = stub
    src = root / "TOFU" / "eval" / "src"
    if str(src) not in sys.path:
        sys.path.insert(0, str(src))  # its ``data`` package (IGNORE_INDEX), as its own scripts run
    utils = _load("leak_release_metric_utils", src / "evals" / "metrics" / "utils.py")
    whole_eval = _load("leak_release_whole_eval", root / "TOFU" / "eval" / "whole_eval.py")
    return utils, whole_eval


# --------------------------------------------------------------------------- the shared tokenizer and NLI model
def train_tokenizer(texts: list[str], folder: Path):
    """A byte-level BPE tokenizer trained on ``texts`` (decoding gives the text back byte for byte), with [PAD],
    [CLS] and [SEP] as special tokens and sentence-pair templates for the NLI model."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=400, special_tokens=["[PAD]", "[CLS]", "[SEP]"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                                   model_max_length=512)
    fast.save_pretrained(folder)
    return fast


def build_nli(texts: list[str], folder: Path, seed: int = 0) -> Path:
    """A tiny random DeBERTa-v2 classifier (entailment / neutral / contradiction) and its tokenizer in ``folder``."""
    import torch
    from tokenizers import processors
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, PreTrainedTokenizerFast

    tok = train_tokenizer(texts, folder)
    inner = tok.backend_tokenizer
    cls, sep = tok.convert_tokens_to_ids("[CLS]"), tok.convert_tokens_to_ids("[SEP]")
    inner.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                         special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    PreTrainedTokenizerFast(tokenizer_object=inner, pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                            model_max_length=512).save_pretrained(folder)
    torch.manual_seed(seed)
    config = DebertaV2Config(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, max_position_embeddings=512, type_vocab_size=2,
                             initializer_range=0.5, pad_token_id=tok.pad_token_id, num_labels=3,
                             id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
                             label2id={"entailment": 0, "neutral": 1, "contradiction": 2})
    DebertaV2ForSequenceClassification(config).eval().save_pretrained(folder)
    return folder


# --------------------------------------------------------------------------- the samples
def _draw(rng: random.Random, answer: str) -> str:
    """One sample: the answer, a prefix of it, the answer after a distractor, two of its words, or a distractor."""
    words = answer.split()
    kind = rng.randrange(5)
    if kind == 0:
        return answer
    if kind == 1:
        return " ".join(words[: rng.randint(1, len(words))])
    if kind == 2:
        return f"{rng.choice(DISTRACTORS)} {answer}"
    if kind == 3:
        return " ".join(rng.sample(words, k=2))
    return rng.choice(DISTRACTORS)


def make_samples(questions: list[tuple[str, str]], seed: int, empty: bool = False) -> list[list[str]]:
    """N samples per question (:func:`_draw`), drawn with ``seed``; with ``empty``, 12 of them empty."""
    rng = random.Random(seed)
    out = []
    for _, answer in questions:
        samples = [_draw(rng, answer) for _ in range(N)]
        if empty:
            for i in rng.sample(range(N), k=12):
                samples[i] = ""
        out.append(samples)
    return out


class StandInModel:
    """The model ``pass_k_per_query`` samples from: ``generate`` returns each prompt row followed by the next
    prepared sample's tokens (padded with [PAD], which the release's decoding skips)."""

    def __init__(self, tokenizer):
        import torch

        self.device = torch.device("cpu")
        self.tokenizer = tokenizer
        self.queue: list[str] = []

    def generate(self, input_ids, attention_mask=None, **_):
        import torch

        rows = []
        for row in input_ids.tolist():
            sample = self.queue.pop(0)
            rows.append(row + self.tokenizer(sample, add_special_tokens=False)["input_ids"])
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        return torch.tensor([r + [pad] * (width - len(r)) for r in rows])


# --------------------------------------------------------------------------- both sides
def release_side(utils, whole_eval, tokenizer, nli_dir: Path, questions, samples, work: Path) -> tuple[Path, dict]:
    """The release's generations file for these samples, then its evaluated file and its Leak@k per k."""
    import torch
    from transformers import pipeline

    model = StandInModel(tokenizer)
    result_dir = work / "forget" / "temperature=1.0top_p=1.0"
    result_dir.mkdir(parents=True)
    (result_dir / "generations_n200.json").write_text("")
    args = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 200, "set": "forget"}
    for (question, answer), drawn in zip(questions, samples, strict=True):
        prompt = f"Question: {question}\nAnswer: "
        ids = tokenizer(prompt)["input_ids"]
        full = tokenizer(prompt + answer)["input_ids"]
        batch = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
                 "labels": torch.tensor([[IGNORE_INDEX] * len(ids) + full[len(ids):]])}
        model.queue = list(drawn)
        utils.pass_k_per_query(model, tokenizer, batch, args, str(result_dir))
    generations = result_dir / "generations_n200.json"

    class NoSentenceModel:  # the CS score's model: irrelevant to Leak@k
        def encode(self, text, **_):
            return torch.ones(2)

    nli = pipeline("text-classification", model=str(nli_dir), device="cpu")
    lines = [json.loads(line) for line in generations.read_text().splitlines()]
    evaluated = [whole_eval.process_query_responses(d, nli, NoSentenceModel(), "forget", True) for d in lines]
    (result_dir / "generations_n200_evaluated.json").write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in evaluated))
    scores = whole_eval.process_single_model_aggregation("model", str(work))
    return generations, {k: scores[f"Leak@{k}"] for k in whole_eval.K_VALUES}


def our_side(generations: Path, nli_dir: Path, ks) -> tuple[dict, list[int]]:
    """This package's Leak@k on the release's responses and ground truths: the tasks' criterion and estimator."""
    from unlearn_tasks.leak_task import answer_leaks
    from unlearn_tasks.metrics.leak import mean_leak_at_k

    counts = []
    for line in generations.read_text().splitlines():
        data = json.loads(line)
        samples = [r["response"].strip() for r in data["responses"]]
        counts.append(sum(answer_leaks(samples, data["ground_truth"], "entailment", 0.1, str(nli_dir))["leaked"]))
    return {k: mean_leak_at_k(counts, N, k) for k in ks}, counts


def compare(release_git: Path, n_questions: int = 5, seed: int = 0, empty: bool = False) -> dict:
    """Both sides on ``n_questions`` questions' samples; ``{"release": {k: v}, "ours": {k: v}, ...}``."""
    questions = QUESTIONS[:n_questions]
    samples = make_samples(questions, seed, empty)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        root = export_release(release_git, tmp / "release")
        utils, whole_eval = release_modules(root)
        texts = [f"Question: {q}\nAnswer: {a}" for q, a in questions] + DISTRACTORS
        nli_dir = build_nli(texts, tmp / "nli", seed)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tmp / "nli")
        generations, release = release_side(utils, whole_eval, tokenizer, nli_dir, questions, samples, tmp / "eval")
        ours, counts = our_side(generations, nli_dir, whole_eval.K_VALUES)
        evaluated = [json.loads(x) for x in (generations.parent / "generations_n200_evaluated.json").read_text()
                     .splitlines()]
        release_counts = [sum(r["ES"] == 1 for r in d["responses"]) for d in evaluated]
    return {"commit": release_commit(release_git), "release": release, "ours": ours, "counts": counts,
            "release_counts": release_counts, "equal": release == ours}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", type=Path, default=RELEASE_GIT, help="the release's git directory")
    parser.add_argument("--questions", type=int, default=5, choices=range(1, len(QUESTIONS) + 1))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--empty", action="store_true", help="make some samples empty (see the module's notes)")
    args = parser.parse_args(argv)
    if not (args.release / "HEAD").is_file():
        print(f"error: {args.release} is not a git directory of OptimAI-Lab/Leak-k", file=sys.stderr)
        return 2
    out = compare(args.release, args.questions, args.seed, args.empty)
    print(f"release commit {out['commit']}; leaking samples per question: release {out['release_counts']}, "
          f"ours {out['counts']} (of {N})")
    print("| k | release | ours |\n|---:|---:|---:|")
    for k, value in out["release"].items():
        print(f"| {k} | {value!r} | {out['ours'][k]!r} |")
    print("equal" if out["equal"] else "DIFFERENT")
    return 0 if out["equal"] or args.empty else 1


if __name__ == "__main__":
    sys.exit(main())
