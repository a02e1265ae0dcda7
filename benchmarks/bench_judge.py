"""``unlearn judge`` over a forget10-sized set of real generations, timed: the TOFU authors' own evaluation logs
(``../shared/data/tofu/legacy_eval_logs/<model>/``, or under ``$UNLEARN_SHARED_DATA``: 300 forget10 and 300 retain questions, each with the model's
greedy generation and the ground truth) written as lm-eval's samples files, judged by SmolLM2-135M-Instruct (the
test fixture's float32 folder) through lm-eval's ``hf`` class, then again (every reply from the cache).

    PYTHONPATH=. python benchmarks/bench_judge.py [--logs phi_retain90] [--limit N] [--backend hf] [--base-url URL]

With ``--backend local-chat-completions --base-url http://127.0.0.1:8000/v1/chat/completions`` the judge is a served
model (e.g. ``vllm serve`` of the same folder; the server applies its chat template); ``--judge`` names it.
``local-completions`` sends the prompt without the template, and SmolLM2 then replies with no parsable Yes or No.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from unlearn_app.cli import main

LOGS = Path(os.environ.get("UNLEARN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data") / \
    "tofu" / "legacy_eval_logs"
STAMP = "2026-01-01T00-00-00.000001"


def write_run(log_dir: Path, folder: Path, limit: int | None) -> int:
    """``folder`` as lm-eval writes ``tofu_forget10_rouge`` with --log_samples, from a legacy log pair."""
    lines = []
    for split, name in (("forget", "eval_log_forget.json"), ("retain", "eval_log.json")):
        gen = json.loads((log_dir / name).read_text())["generated_text"]
        for i in sorted(gen, key=int)[:limit]:
            question, generation, truth = gen[i]
            doc = {"split": split, "index": int(i), "question": question.removeprefix("Question: ").strip(),
                   "answer": truth}
            lines.append({"doc_id": len(lines), "doc": doc, "filtered_resps": [generation.removeprefix("Answer: ")],
                          "filter": "none"})
    folder.mkdir(parents=True)
    (folder / f"samples_tofu_forget10_rouge_{STAMP}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / f"results_{STAMP}.json").write_text(json.dumps({"results": {"tofu_forget10_rouge": {"alias": "x"}}}))
    return len(lines)


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", default="phi_retain90", help="a folder of legacy_eval_logs")
    ap.add_argument("--limit", type=int, help="items per set (default: all 300)")
    ap.add_argument("--judge", help="the judge (default: the SmolLM2 test fixture's folder)")
    ap.add_argument("--backend", default="hf")
    ap.add_argument("--base-url")
    ap.add_argument("--batch-size", default="8")
    args = ap.parse_args()
    judge = args.judge
    if judge is None:
        from unlearn_methods.pretrained import build_smollm2

        judge = str(build_smollm2())
    with tempfile.TemporaryDirectory() as tmp:
        n = write_run(LOGS / args.logs, Path(tmp) / "run", args.limit)
        common = ["judge", str(Path(tmp) / "run"), "--judge", judge, "--backend", args.backend, "--cache-dir",
                  str(Path(tmp) / "cache"), *(["--base-url", args.base_url] if args.base_url else []),
                  *(["--batch-size", args.batch_size, "--device", "cpu"] if args.backend == "hf" else [])]
        for attempt in ("first pass", "rerun (cached)"):
            start = time.perf_counter()
            rc = main([*common, "--out", str(Path(tmp) / attempt.split()[0])])
            print(f"{attempt}: {n} items, {time.perf_counter() - start:.1f} s (exit {rc})")


if __name__ == "__main__":
    main_()
