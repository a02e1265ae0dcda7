"""MLLMU-Bench here and in its release (franciscoliu/MLLMU-Bench), side by side on the same generated answers: every
request (prompt text and the photos passed with it) and every score, compared exactly.

    PYTHONPATH=. python benchmarks/bench_mllmu_release.py [--release /work/.mirror/franciscoliu+MLLMU-Bench/repo]
        [--people 40] [--forget forget15] [--seed 0]

The release's checkout (a git directory) is exported with ``git archive`` to a temporary folder and its ``eval.py``
imported from there; its own ``evaluate_classification``, ``evaluate_fill_in_the_blank`` and ``evaluate_generation``
run on a dataset written by this project in the Hub's layout (:mod:`unlearn_methods.scaffolding.mllmu_corpus`), once
per set with the arguments its ``main`` passes (forget, test, retain_shared, retain_celebrity), Python's global
generator seeded before each call. Its model loop is stubbed: a processor / tokenizer that keep the prompt and the
photos, a model whose ``generate`` returns the prompt followed by a prepared answer (a fixed function of the prompt:
letters in several spellings, cloze words, sentences, answers that write ``ASSISTANT:`` again, empty answers), and a
``decode`` that joins them; everything after it is the release's. This package's side builds the task documents
(:func:`unlearn_tasks.mllmu.documents.build_docs`) and scores the same answers with
:mod:`unlearn_tasks.mllmu.scoring`, what the lm-eval tasks call.

One difference is fixed, not compared: the release concatenates ``Test_Set``'s shards in ``os.listdir`` order (file
system order), this package in name order; the release's ``os.listdir`` is sorted while it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import io
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import types
from pathlib import Path

RELEASE_GIT = Path("/work/.mirror/franciscoliu+MLLMU-Bench/repo")
LLAVA = "llava-hf/llava-1.5-7b-hf"
#: The release's set names (its ``mode`` argument) for ours.
RELEASE_MODES = {"forget": "forget", "test": "test", "retain": "retain_shared", "celebrity": "retain_celebrity"}


def export_release(git_dir: Path, dest: Path) -> Path:
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", "HEAD"], check=True, capture_output=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def load_release_eval(root: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("mllmu_release_eval", root / "eval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def answer_for(prompt: str, photos: tuple[str, ...] = ()) -> str:
    """The prepared answer to a request (a fixed function of its prompt and photos, so both sides get the same)."""
    from unlearn_methods.scaffolding.mllmu_corpus import CITIES, HOBBIES, JOBS
    from unlearn_tasks.mllmu import prompts

    h = int(hashlib.sha256((prompt + "|".join(photos)).encode()).hexdigest(), 16)
    question = prompt.rsplit("USER:", 1)[-1]
    if prompts.CLASSIFICATION_INSTRUCTION in prompt:
        pool = ["A", "B", "C", "D", "a", " b) the second", "C. editor", "d", "E", "", "The answer is A",
                "ASSISTANT: B", "B\nASSISTANT: C", "  c"]
    elif prompts.CLOZE_INSTRUCTION in prompt:
        words = CITIES if "born" in question else JOBS if "works" in question else HOBBIES
        word = words[h % len(words)]
        pool = [word, word.upper() + " indeed", f"It is {word}.", "", "I do not know", f"ASSISTANT: {word}",
                f"x\nASSISTANT: {word}"]
    else:
        city, job = CITIES[h % len(CITIES)], JOBS[(h >> 8) % len(JOBS)]
        pool = [f"This person was born in {city}.", f"They work as a {job} and were born in {city}.",
                f"works as a {job}", "", "I cannot answer that.", f"Born in {city}. ASSISTANT: no", city,
                f"The person in the image was born in {city} and works as a {job}."]
    return pool[(h >> 16) % len(pool)]


def image_hash(img) -> str:
    return hashlib.sha256(img.convert("RGB").tobytes()).hexdigest()[:16]


class _Inputs(dict):
    def to(self, *_):
        return self


class _Stub:
    """The release's processor, tokenizer and model at once: keeps each request, answers with :func:`answer_for`."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, text=None, images=None, return_tensors=None, **_):
        images = [images] if images is not None and not isinstance(images, list) else (images or [])
        photos = tuple(image_hash(i) for i in images)
        self.requests.append((text, photos))
        return _Inputs(prompt=text, photos=photos)

    def generate(self, prompt=None, photos=(), **_):
        return [["<s>", "USER", prompt + answer_for(prompt, photos)]]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(ids)


@contextlib.contextmanager
def _sorted_listdir():
    real = os.listdir
    os.listdir = lambda path=".": sorted(real(path))
    try:
        yield
    finally:
        os.listdir = real


def release_side(release: types.ModuleType, data: Path, forget_split: str, seed: int, work: Path) -> tuple[dict, list]:
    """{set: {evaluation: the release's result dict}} and the requests it made, in order."""
    from unlearn_tasks.mllmu.splits import CELEBRITY_SET, FULL_SET, TEST_SET, forget_config, retain_config

    stub = _Stub()
    args = argparse.Namespace(model_id=LLAVA, output_folder=str(work / "release_out"))
    forget_file = str(data / forget_config(forget_split) / "train-00000-of-00001.parquet")
    files = {"forget": forget_file, "test": str(data / TEST_SET),
             "retain": str(data / retain_config(forget_split) / "train-00000-of-00001.parquet"),
             "celebrity": str(data / CELEBRITY_SET / "train-00000-of-00001.parquet")}
    few_shot = str(data / FULL_SET / "train-00000-of-00001.parquet")
    out: dict[str, dict] = {}
    with _sorted_listdir(), contextlib.redirect_stdout(io.StringIO()):
        for name, path in files.items():
            mode = RELEASE_MODES[name]
            extra = {"forget_parquet_file": forget_file} if name == "test" else {}
            out[name] = {}
            random.seed(seed)
            out[name]["classification"] = release.evaluate_classification(path, few_shot, stub, stub, stub, args,
                                                                          mode=mode, **extra)
            random.seed(seed)
            out[name]["cloze"] = release.evaluate_fill_in_the_blank(path, few_shot, stub, stub, stub, args, mode=mode,
                                                                    **extra)
            random.seed(seed)
            out[name]["generation"] = release.evaluate_generation(path, stub, stub, stub, args, mode=mode, **extra)
    return out, stub.requests


def our_side(data: Path, forget_split: str, seed: int) -> tuple[dict[str, float], list]:
    """Our metrics ({modality: {metric: value}}) and requests (prompt, photo hashes), from the task documents."""
    from unlearn_tasks.mllmu import scoring
    from unlearn_tasks.mllmu.documents import PARTS, build_docs
    from unlearn_tasks.mllmu.splits import SETS

    metrics, requests = {}, []
    for modality in ("image", "text"):
        docs, images = build_docs(forget_split, modality, data_dir=data, seed=seed)
        photos = [tuple(image_hash(images[k]) for k in d["images"]) for d in docs]
        records = [scoring.score_document(d, answer_for(d["prompt"], p)) for d, p in zip(docs, photos)]
        metrics[modality] = scoring.compute_metrics(records, list(PARTS), list(SETS), "release")
        requests += [(d["prompt"], p) for d, p in zip(docs, photos)]
    return metrics, requests


def release_metrics(release_out: dict) -> dict[str, dict[str, float]]:
    """The release's numbers under our metric names."""
    out: dict[str, dict[str, float]] = {"image": {}, "text": {}}
    for s, res in release_out.items():
        c, z, g = res["classification"], res["cloze"], res["generation"]
        for modality, cls_key, cloze_key, gen in (("image", "Image-Textual Question Accuracy", "image_textual_accuracy",
                                                   "Image_Textual"),
                                                  ("text", "Pure Text Question Accuracy", "pure_text_accuracy",
                                                   "Pure_Text")):
            out[modality][f"{s}_classification_acc"] = c[cls_key]
            out[modality][f"{s}_cloze_acc"] = z[cloze_key]
            for ours, theirs in (("rouge1", "ROUGE-1"), ("rouge2", "ROUGE-2"), ("rougeL", "ROUGE-L"), ("bleu", "BLEU")):
                out[modality][f"{s}_{ours}"] = g.get(f"Average {theirs} ({gen})", float("nan"))
    return out


def compare(release_git: Path = RELEASE_GIT, n_people: int = 40, forget_split: str = "forget15", seed: int = 0) -> dict:
    from unlearn_methods.scaffolding.mllmu_corpus import write_mllmu_layout

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        release = load_release_eval(export_release(release_git, work / "release"))
        data = write_mllmu_layout(work / "data", n_people=n_people)
        theirs, their_requests = release_side(release, data, forget_split, seed, work)
        ours, our_requests = our_side(data, forget_split, seed)
    commit = subprocess.run(["git", "--git-dir", str(release_git), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    return {"commit": commit, "release": release_metrics(theirs), "ours": ours, "release_requests": their_requests,
            "our_requests": our_requests}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--release", type=Path, default=RELEASE_GIT)
    p.add_argument("--people", type=int, default=40)
    p.add_argument("--forget", default="forget15")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    out = compare(a.release, a.people, a.forget, a.seed)
    same_requests = sorted(out["release_requests"]) == sorted(out["our_requests"])
    print(f"release commit {out['commit']}")
    print(f"requests: release {len(out['release_requests'])}, ours {len(out['our_requests'])}, "
          f"identical (prompt and photos): {same_requests}")
    for modality in ("image", "text"):
        for name, value in out["ours"][modality].items():
            theirs = out["release"][modality][name]
            flag = "==" if value == theirs or (value != value and theirs != theirs) else "!="
            print(f"{modality:5s} {name:28s} ours {value!r:22s} {flag} release {theirs!r}")
    sys.exit(0 if same_requests else 1)


if __name__ == "__main__":
    main()
