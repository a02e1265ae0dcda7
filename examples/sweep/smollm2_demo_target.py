"""The target model of examples/sweep/smollm2-demo.yaml: SmolLM2-135M-Instruct fine-tuned on the demo corpus's
forget01 author, its 4 retain-evaluation authors, the real authors and the world facts (as `unlearn demo --model
smollm2` builds its target: full fine-tuning, 3 epochs, lr 1e-4).

    python examples/sweep/smollm2_demo_target.py sweep-smollm2     # writes sweep-smollm2/data and sweep-smollm2/target
"""

import sys
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

from unlearn_app.demo.pretrained import PretrainedDemoConfig, _records
from unlearn_methods.finetune import finetune
from unlearn_methods.pretrained import build_smollm2
from unlearn_methods.scaffolding.tofu_corpus import build_corpus, write_corpus

if __name__ == "__main__":
    workdir, cfg = Path(sys.argv[1] if len(sys.argv) > 1 else "sweep-smollm2"), PretrainedDemoConfig()
    base = build_smollm2()
    write_corpus(workdir / "data", seed=cfg.seed)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
    metrics = finetune(model, tokenizer, _records(build_corpus(cfg.seed), with_forget=True), workdir / "target",
                       epochs=cfg.epochs, lr=cfg.lr, batch_size=8, seed=cfg.seed, disable_progress=True)
    print(f"target in {workdir / 'target'}; final training loss {metrics.get('train_loss', float('nan')):.4f}")
