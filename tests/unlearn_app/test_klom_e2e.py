"""End to end on tiny Llamas trained here: 4 oracle models (retain data only), 4 models that never unlearned
(retain + forget data) and 4 more retain-only models, different seeds; margins with ``unlearn margins`` (the
``margins_tofu_forget01`` lm-eval task), then ``unlearn klom`` and ``unlearn ulira``. The never-unlearned
ensemble must be further from the oracles on the forget split than the retain-only one. About a minute."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM

from unlearn_app.cli import main
from unlearn_methods.finetune import finetune
from unlearn_methods.scaffolding.tofu_corpus import build_corpus


@pytest.mark.slow
def test_klom_separates_a_never_unlearned_ensemble(tiny_model_dir, demo_data_dir, tmp_path):
    corpus = build_corpus(0)
    forget, retain = corpus["forget01"], corpus["retain99"][:18]
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = AutoConfig.from_pretrained(tiny_model_dir)
    files: dict[str, list[str]] = {}
    for kind, seeds, records in (("oracle", range(0, 4), retain), ("full", range(4, 8), retain + forget),
                                 ("retain", range(8, 12), retain)):
        for seed in seeds:
            torch.manual_seed(seed)
            out = tmp_path / f"{kind}{seed}"
            finetune(LlamaForCausalLM(config), tok, records, out, epochs=12, lr=3e-3, batch_size=8, seed=seed,
                     disable_progress=True)
            margins = f"{out}.npy"
            assert main(["margins", "--model", str(out), "--data", "tofu", "--forget", "forget01", "--data-dir",
                         str(demo_data_dir), "--out", margins, "--splits-out", str(tmp_path / "splits.json"),
                         *(["--overwrite"] if files else [])]) == 0  # every model writes the same splits
            files.setdefault(kind, []).append(margins)
    result = {}
    for kind in ("full", "retain"):
        assert main(["klom", "--unlearned", *files[kind], "--oracle", *files["oracle"], "--splits",
                     str(tmp_path / "splits.json"), "--out", str(tmp_path / f"klom_{kind}.json")]) == 0
        result[kind] = json.loads((tmp_path / f"klom_{kind}.json").read_text())["splits"]
        assert main(["ulira", "--unlearned", *files[kind], "--oracle", *files["oracle"], "--splits",
                     str(tmp_path / "splits.json"), "--variance", "global",
                     "--out", str(tmp_path / f"ulira_{kind}.json")]) == 0
        result[kind]["ulira"] = json.loads((tmp_path / f"ulira_{kind}.json").read_text())
    assert result["full"]["forget"]["n"] == len(forget)
    assert result["full"]["forget"]["mean"] > result["retain"]["forget"]["mean"] + 1.0
    # the attack tells never-unlearned models from retrained ones on the forget set, not retain-only ones
    assert result["full"]["ulira"]["auroc"] > 0.9
    assert result["retain"]["ulira"]["auroc"] < result["full"]["ulira"]["auroc"] - 0.2
