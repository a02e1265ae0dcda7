"""Where one training step of a method goes, on SmolLM2-135M-Instruct in open-unlearning's chat setting: the loss's
forwards, backward and the (fused) AdamW step, timed per step in one process, with the process's resident memory
after each part. Run it with ``PYTHONPATH`` set to the checkout whose losses you want timed (its ``unlearn_methods``
is imported), e.g. this one against an earlier commit's worktree, interleaved:

    for code in /path/to/old-worktree .; do PYTHONPATH=$code python benchmarks/bench_train_step.py --method npo; done

The batches are the demo corpus's forget10 items in the chat format (``bench_ou_trainers.our_batches``, batch 4 of
forget and 4 of retain), the reference values of a method's ``reference_nll`` computed once before the steps, as
``unlearn run`` does. The first step allocates AdamW's state: read the later ones. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def rss_mib() -> int:
    """This process's resident memory now, MiB."""
    return int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) // 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--method", default="npo", help="A method name of `unlearn methods` (default npo).")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--lora", action="store_true", help="LoRA (rank 8, alpha 16, every linear layer).")
    args = p.parse_args(argv)

    import bench_ou_trainers
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments

    from unlearn_methods import get_method, reference
    from unlearn_methods.base import UnlearnTrainer
    from unlearn_methods.pretrained import build_smollm2
    from unlearn_methods.scaffolding.tofu_corpus import write_corpus

    torch.set_num_threads(args.threads)
    model_dir = build_smollm2()
    tok = AutoTokenizer.from_pretrained(model_dir)
    with tempfile.TemporaryDirectory() as tmp:
        data = write_corpus(Path(tmp) / "data")
        batches = bench_ou_trainers.our_batches(tok, {"date_string": "10 Apr 2025"}, 4, args.steps, data)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        method = get_method(args.method, {})
        batches = [reference.scored(model, b, method.reference_nll) for b in batches]
        if args.lora:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear",
                                                     task_type="CAUSAL_LM"))
        trainer = UnlearnTrainer(model=model, method=method, args=TrainingArguments(
            output_dir=str(Path(tmp) / "trainer"), report_to=[], use_cpu=True, per_device_train_batch_size=4,
            remove_unused_columns=False))
        trainer.state.epoch = 0.0
        optimiser = torch.optim.AdamW([w for w in model.parameters() if w.requires_grad], lr=1e-5, fused=True)
        steps = []
        for batch in batches:
            start = time.perf_counter()
            loss = trainer.compute_loss(model, batch)
            forwards, after_forwards = time.perf_counter(), rss_mib()
            optimiser.zero_grad()
            loss.backward()
            backward, after_backward = time.perf_counter(), rss_mib()
            optimiser.step()
            steps.append({"forwards_s": round(forwards - start, 3), "backward_s": round(backward - forwards, 3),
                          "adamw_s": round(time.perf_counter() - backward, 3), "loss": float(loss.detach()),
                          "rss_after_forwards_mib": after_forwards, "rss_after_backward_mib": after_backward,
                          "rss_after_step_mib": rss_mib(), "tokens": int(batch["forget"]["input_ids"].numel())})
    print(json.dumps({"date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC", "machine": platform.processor() or
                      platform.machine(), "cpus": os.cpu_count(), "load": os.getloadavg()[0],
                      "code": os.environ.get("PYTHONPATH", "."), "method": args.method, "lora": args.lora,
                      "threads": args.threads, "steps": steps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
