"""One example command per ``unlearn`` subcommand, shown at the end of its ``--help`` (:func:`unlearn_app.cli.build_parser`
adds them) and so in docs/cli.md. Keyed by the subcommand as typed after ``unlearn``; every example parses with the
real parser (``tests/unlearn_app/test_cli_words.py``), so a renamed flag shows here first. Placeholders in capitals
(MODEL, RUN) stand for the reader's own models and runs."""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "demo": ("unlearn demo --workdir unlearn_demo", "unlearn demo --model smollm2"),
    "run": ("unlearn run --method npo --model MODEL --data tofu --forget forget10 --lora --out ckpt/npo",),
    "sweep": ("unlearn sweep sweep.yaml --out sweeps/tofu-lora",),
    "report": ("unlearn report runs/base runs/npo --out report.md --plot report.png",),
    "export-ou": ("unlearn export-ou runs/npo --out saves/eval/tofu_forget10_npo",),
    "judge": ("unlearn judge runs/npo --judge Qwen/Qwen2.5-7B-Instruct --out judged/npo",),
    "methods": ("unlearn methods",),
    "push": ("unlearn push ckpt/npo --repo me/tofu-npo",),
    "submit": ("unlearn submit runs/npo --reference runs/retain --to board/",),
    "leaderboard": ("unlearn leaderboard validate board/",),
    "leaderboard validate": ("unlearn leaderboard validate board/",),
    "leaderboard build": ("unlearn leaderboard build --from board/ --out site/",),
    "watermark": ("unlearn watermark --id 3 --model MODEL --in data.jsonl --out watermarked.jsonl",),
    "verify": ("unlearn verify --ids 0-19 --in outputs.jsonl --out scores.json",),
    "waterdrum": ("unlearn waterdrum report runs/original runs/retrained runs/npo --out report/",),
    "waterdrum report": ("unlearn waterdrum report runs/original runs/retrained runs/npo --original original "
                         "--retrained retrained --out report/",),
    "deep-unlearning": ("unlearn deep-unlearning sweep runs/npo_lr1e-5 runs/npo_lr2e-5 --plot ra.png",),
    "deep-unlearning score": ("unlearn deep-unlearning score --relationships R.json --target 272",),
    "deep-unlearning sweep": ("unlearn deep-unlearning sweep runs/npo_lr1e-5 runs/npo_lr2e-5 --plot ra.png",),
    "klom": ("unlearn klom --unlearned npo.npy --oracle oracle.npy --splits splits.json --out klom.json",),
    "ulira": ("unlearn ulira --unlearned npo.npy --oracle oracle.npy --splits splits.json --out ulira.json",),
    "margins": ("unlearn margins --model npo/seed0 npo/seed1 --data tofu --forget forget10 --out npo.npy",),
    "margins gather": ("unlearn margins gather runs/margins_seed0 runs/margins_seed1 --out npo.npy",),
    "blur-references": ("unlearn blur-references --model MODEL --out refs/MODEL",),
    "depth": ("unlearn depth --model UNLEARNED --target TARGET --retain RETAIN --data tofu --forget forget10 "
              "--entities forget10_filtered.json --out uds/",),
    "ci": ("unlearn ci --model ckpt/npo --suite suite.yaml --out ci-out",),
    "attack": ("unlearn attack quantize --model ckpt/npo --bits 4 --out ckpt/npo_int4",),
    "attack quantize": ("unlearn attack quantize --model ckpt/npo --bits 4 --out ckpt/npo_int4",),
    "attack relearn": ("unlearn attack relearn --model ckpt/npo --data tofu --forget forget10 --out ckpt/npo_relearn",),
    "attack report": ("unlearn attack report --unlearned runs/npo --attacked int4=runs/npo_int4 "
                      "--metrics tofu_forget10/forget_prob --out attack_report",),
    "tasks-dir": ("unlearn tasks-dir",
                  "lm_eval --include_path \"$(unlearn tasks-dir)\" --model hf --model_args pretrained=MODEL "
                  "--tasks tofu_forget10",),
}
