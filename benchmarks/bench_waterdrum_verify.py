"""Throughput of WaterDrum/Waterfall verification: batched engine vs the straightforward per-text loop.

Texts are synthetic token streams (Zipf-distributed ids, like word frequencies; ~93 distinct tokens per
200-token text) over the Llama-3 base vocabulary N = 128000, scored under 20 owner ids with k_p = 1.

* straightforward: text by text, id by id, ``RandomState([id, prev]).permutation(N)`` per bigram with an
  LRU cache of 512 permutations (256 MB), mean cos. Slow, so it runs on the first ``--naive-texts`` texts
  and its rate is reported per text.
* engine: ``verify_tokens`` on the whole batch: one permutation per distinct (id, previous token) of the
  batch, on all cores, with the compiled kernel when numba is installed (``--backend numpy`` without).
  Its per-text cost falls as the batch grows (more shared previous tokens), so the batch size is part of
  the result.

Scores of the overlapping texts must agree (|diff| <= 1e-9). Run:
``PYTHONPATH=. python benchmarks/bench_waterdrum_verify.py [--texts 200] [--naive-texts 3]``

End to end against the Waterfall package (``--end-to-end 300 3000``): wall time of one process from start to
exit, reading a JSONL file of English texts (demo-corpus answers joined, about 150 Llama-3 tokens each) and
scoring every text under 3 owner ids with k_p = 1. Ours is ``unlearn verify`` (default Llama-3 tokenizer, from
the llama-models package); Waterfall's is ``Watermarker(tokenizer=DIR).verify(texts, id=[0, 1, 2], k_p=[1])``
with a Hugging Face tokenizer converted from the same ``tokenizer.model`` (tokenisations checked equal). Scores
must agree to 1e-6 (Waterfall computes them in float32). Waterfall needs torch, transformers and
sentence-transformers; install it apart from this package's pins:

    python -m venv --system-site-packages /tmp/wf && /tmp/wf/bin/pip install waterfall
    PYTHONPATH=. python benchmarks/bench_waterdrum_verify.py --end-to-end 300 3000 --repeats 5 \\
        --waterfall-python /tmp/wf/bin/python

``--repeats N`` runs each side N times, interleaved (order alternating), and prints every run with the load
average, then the min and median of each side and the speed-up. One untimed run of ours comes first (the first run
after an install builds the compiled kernel's cache file, seconds that later runs do not pay).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from unlearn_tasks.waterdrum import mt19937  # noqa: E402
from unlearn_tasks.waterdrum.permutation import default_workers  # noqa: E402
from unlearn_tasks.waterdrum.verify import counted_bigrams, verify_tokens  # noqa: E402
from unlearn_tasks.waterdrum.verify_naive import NaiveVerifier  # noqa: E402


def synthetic_texts(n_texts: int, length: int, vocab: int, zipf: float, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.minimum(rng.zipf(zipf, size=length) - 1, vocab - 1) for _ in range(n_texts)]


WATERFALL_SCRIPT = """
import json, sys
from waterfall.WatermarkerBase import Watermarker
tok, path, out, ids = sys.argv[1], sys.argv[2], sys.argv[3], [int(i) for i in sys.argv[4].split(",")]
texts = [json.loads(line)["text"] for line in open(path, encoding="utf-8") if line.strip()]
scores = Watermarker(tokenizer=tok).verify(texts, id=ids, k_p=[1])
json.dump([[float(s) for s in row[:, 0]] for row in scores], open(out, "w"))
"""


def english_texts(n_texts: int) -> list[str]:
    from unlearn_methods.scaffolding.tofu_corpus import build_corpus

    rows = build_corpus()["full"]
    return [" ".join(rows[(i * 7 + k) % len(rows)]["answer"] for k in range(12)) for i in range(n_texts)]


def llama3_hf_tokenizer(out: Path) -> Path:
    """The llama-models Llama-3 tokenizer as a Hugging Face tokenizer folder (for Waterfall)."""
    import llama_models
    from llama_models.llama3.tokenizer import Tokenizer
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    tok = Tokenizer.get_instance()
    model_file = Path(llama_models.__file__).parent / "llama3" / "tokenizer.model"
    specials = sorted(tok.special_tokens, key=tok.special_tokens.get)
    conv = TikTokenConverter(vocab_file=str(model_file), pattern=tok.pat_str, extra_special_tokens=specials)
    fast = PreTrainedTokenizerFast(tokenizer_object=conv.converted(), bos_token="<|begin_of_text|>",
                                   eos_token="<|end_of_text|>")
    for text in english_texts(50):
        assert fast.encode(text, add_special_tokens=False) == tok.encode(text, bos=False, eos=False), text
    fast.save_pretrained(out)
    return out


def _timed(cmd: list[str], env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{cmd[0]} ... failed:\n{done.stderr[-3000:]}")
    return seconds


def end_to_end(sizes: list[int], waterfall_python: str | None, repeats: int) -> None:
    """``unlearn verify`` vs the Waterfall package, each a fresh process, same texts, 3 ids."""
    ids = [0, 1, 2]
    print(f"end to end, {len(ids)} ids, k_p = 1; machine: {platform.node()} {platform.machine()} {_cpu_name()}, "
          f"{os.cpu_count()} CPUs; {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC; {_load()}; {repeats} interleaved "
          f"run(s) a side (min and median reported)", flush=True)
    if waterfall_python is None:
        try:
            import waterfall  # noqa: F401

            waterfall_python = sys.executable
        except ImportError:
            print("Waterfall is not installed: only our side runs. See this script's docstring to install it "
                  "in a throwaway environment and pass --waterfall-python.")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                        os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        tok_dir = llama3_hf_tokenizer(tmp_path / "llama3_hf") if waterfall_python else None
        for n in sizes:
            data = tmp_path / f"texts{n}.jsonl"
            data.write_text("".join(json.dumps({"text": t}) + "\n" for t in english_texts(n)))
            ours_out, theirs_out = tmp_path / f"ours{n}.json", tmp_path / f"waterfall{n}.json"
            ours_cmd = [sys.executable, "-m", "unlearn_app", "verify", "--ids", ",".join(map(str, ids)),
                        "--in", str(data), "--out", str(ours_out)]
            theirs_cmd = [waterfall_python or "", "-c", WATERFALL_SCRIPT, str(tok_dir), str(data), str(theirs_out),
                          ",".join(map(str, ids))]
            _timed(ours_cmd, env)  # untimed: builds the compiled kernel's cache file where this install lacks it
            ours_out.unlink(missing_ok=True)
            t_ours, t_theirs = [], []
            for r in range(repeats):  # interleaved (order alternating), so both sides see the same machine load
                order = ["ours", "theirs"] if r % 2 == 0 or not waterfall_python else ["theirs", "ours"]
                for side in order:
                    if side == "ours":
                        ours_out.unlink(missing_ok=True)  # `unlearn verify` refuses to overwrite its output
                        t_ours.append(_timed(ours_cmd, env))
                    elif waterfall_python:
                        t_theirs.append(_timed(theirs_cmd, env))
                print(f"  {n} texts, run {r + 1}: unlearn verify {t_ours[-1]:.2f} s"
                      + (f", Waterfall {t_theirs[-1]:.2f} s" if waterfall_python else "") + f" ({_load()})", flush=True)
            ours = np.array([[t["scores"][str(i)] for i in ids] for t in json.loads(ours_out.read_text())["texts"]])
            line = f"{n:>6} texts: unlearn verify min {min(t_ours):7.2f} s, median {statistics.median(t_ours):7.2f} s"
            if waterfall_python:
                theirs = np.array(json.loads(theirs_out.read_text()))
                diff = float(np.abs(ours - theirs).max())
                assert diff <= 1e-6, f"scores differ by {diff}"
                ratios = [b / a for a, b in zip(t_ours, t_theirs, strict=True)]
                line += (f"   Waterfall min {min(t_theirs):7.2f} s, median {statistics.median(t_theirs):7.2f} s   "
                         f"speed-up (min / min) {min(t_theirs) / min(t_ours):5.1f}x, per run median "
                         f"{statistics.median(ratios):5.1f}x   max |score diff| {diff:.1e}")
            print(line, flush=True)
    print(f"finished {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC; {_load()}")


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _cpu_name() -> str:
    info = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in info.read_text().splitlines()
             if line.startswith("model name")] if info.exists() else []
    return names[0] if names else platform.processor()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=200, help="batch size for the engine")
    ap.add_argument("--naive-texts", type=int, default=3, help="texts for the straightforward loop")
    ap.add_argument("--ids", type=int, default=20)
    ap.add_argument("--length", type=int, default=200)
    ap.add_argument("--vocab", type=int, default=128000)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--workers", type=int, default=None, help="engine processes (default: all cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", choices=["auto", "numba", "numpy"], default="auto", help="engine kernel")
    ap.add_argument("--end-to-end", type=int, nargs="+", metavar="TEXTS",
                    help="instead: time `unlearn verify` end to end (vs Waterfall when installed) on these text counts")
    ap.add_argument("--waterfall-python", help="python of an environment with the waterfall package")
    ap.add_argument("--repeats", type=int, default=1, help="end-to-end runs per side (the best is reported)")
    args = ap.parse_args(argv)
    if args.end_to_end:
        end_to_end(args.end_to_end, args.waterfall_python, args.repeats)
        return 0
    if args.naive_texts > args.texts:
        ap.error("--naive-texts must not exceed --texts")

    texts = synthetic_texts(args.texts, args.length, args.vocab, args.zipf, args.seed)
    ids = list(range(args.ids))
    workers = args.workers or default_workers()
    backend = args.backend if args.backend != "auto" else ("numba" if mt19937.AVAILABLE else "numpy")
    prev, _, _ = counted_bigrams(texts, args.vocab)
    per_text_prevs = np.mean([len(np.unique(t[:-1])) for t in texts])
    print(f"{args.texts} texts x {args.length} tokens, {args.ids} ids, N={args.vocab}, zipf {args.zipf}, "
          f"{workers} worker(s) of {os.cpu_count()} cores, engine kernel: {backend}")
    print(f"distinct previous tokens: {per_text_prevs:.1f} per text, {len(np.unique(prev))} in the batch")

    naive = NaiveVerifier(args.vocab, cache_size=512)
    t0 = time.perf_counter()
    ref = naive.verify(texts[: args.naive_texts], ids, [1], method="sum")
    t_naive = time.perf_counter() - t0
    naive_rate = args.naive_texts / t_naive

    verify_tokens(texts[:1], ids[:1], 1, args.vocab, workers=1, backend=args.backend)  # JIT warm-up
    t0 = time.perf_counter()
    fast = verify_tokens(texts, ids, 1, args.vocab, workers=workers, backend=args.backend)
    t_fast = time.perf_counter() - t0
    fast_rate = args.texts / t_fast

    diff = float(np.abs(fast[: args.naive_texts] - ref).max())
    assert diff <= 1e-9, f"scores differ by {diff}"
    n_perms = args.ids * len(np.unique(prev))
    print(f"straightforward: {args.naive_texts} texts in {t_naive:.2f} s -> {naive_rate:.3f} texts/s "
          f"({naive_rate * args.ids:.2f} text-ids/s, {naive.built} permutations, "
          f"{t_naive / max(naive.built, 1) * 1e3:.2f} ms per permutation)")
    print(f"engine:          {args.texts} texts in {t_fast:.2f} s -> {fast_rate:.3f} texts/s "
          f"({fast_rate * args.ids:.2f} text-ids/s, {n_perms} permutations, "
          f"{t_fast / n_perms * 1e3 * workers:.2f} ms per permutation per core)")
    print(f"speed-up: {fast_rate / naive_rate:.1f}x   (identical scores: max |diff| = {diff:.1e})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
