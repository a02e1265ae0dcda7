"""Tokenizers for verification: the Llama-3 one WaterDrum uses, or any Hugging Face tokenizer.

The Llama-3 tokenizer is looked up in this order: the Hugging Face cache (no network), the
``llama-models`` package (Meta's wheel ships ``llama_models/llama3/tokenizer.model``, a tiktoken BPE file;
``pip install lm-eval-unlearning[waterdrum]``), then the Hub (``meta-llama/Meta-Llama-3-8B``, gated).
All Llama-3.x tokenizers share the 128000 base tokens, so any of them verifies the WaterDrum datasets.
"""

from __future__ import annotations

import binascii
import functools
import os
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

LLAMA3 = "llama3"
LLAMA3_HUB_ID = "meta-llama/Meta-Llama-3-8B"
INSTALL_HINT = "pip install 'lm-eval-unlearning[waterdrum]'"


class TokenizerUnavailable(RuntimeError):
    """The requested tokenizer cannot be loaded here."""


@runtime_checkable
class TextEncoder(Protocol):
    """What verification needs from a tokenizer."""

    name: str
    vocab_size: int  # base vocabulary N: ids >= N are special tokens

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, no BOS/EOS added; literal special-token strings map to their ids."""
        ...

    def decode(self, ids: list[int]) -> str:
        """Text of token ids."""
        ...


class HFEncoder:
    """A Hugging Face tokenizer as a :class:`TextEncoder` (``encode(..., add_special_tokens=False)``)."""

    def __init__(self, tokenizer: Any, name: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.name = name or getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        self.vocab_size = int(tokenizer.vocab_size)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids))


class TiktokenLlama3Encoder:
    """The Llama-3 tokenizer from the ``llama-models`` package (tiktoken, offline)."""

    def __init__(self) -> None:
        try:
            import llama_models.llama3.tokenizer as module
        except ImportError as exc:
            raise TokenizerUnavailable(
                f"the offline Llama-3 tokenizer needs the llama-models and tiktoken packages: {INSTALL_HINT}"
            ) from exc
        # llama-models reads its 128,000 ranks line by line (0.12 s of CPU); read_ranks() gives the same dict in
        # half the time, handed to llama-models' own Tokenizer for the one call that builds it.
        original = module.load_bpe_file
        module.load_bpe_file = functools.partial(read_ranks, fallback=original)
        try:
            self._tok = module.Tokenizer.get_instance()
        finally:
            module.load_bpe_file = original
        self.name = "llama3 (llama-models tokenizer.model)"
        self.vocab_size = int(self._tok.n_words - len(self._tok.special_tokens))

    def encode(self, text: str) -> list[int]:
        # allowed_special="all": a literal "<|eot_id|>" becomes the special id, as in the HF tokenizer.
        return list(self._tok.encode(text, bos=False, eos=False, allowed_special="all"))

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids))


def read_ranks(path: str | os.PathLike, fallback: Callable[[Any], dict[bytes, int]]) -> dict[bytes, int]:
    """The mergeable ranks of a tiktoken BPE file (``base64-token rank`` per line) in one pass; ``fallback(path)``
    for a file of any other shape (its reader's own handling of odd lines)."""
    with open(path, "rb") as f:
        parts = f.read().split()
    if len(parts) % 2 or not all(rank.isdigit() for rank in parts[1::2]):
        return fallback(path)
    return dict(zip(map(binascii.a2b_base64, parts[0::2]), map(int, parts[1::2]), strict=True))


def _hf_tokenizer(name: str, local_only: bool) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name, local_files_only=local_only)


def _hub_cache_dir() -> str | None:
    """The Hugging Face hub cache folder, by ``huggingface_hub.constants``' rules (``HF_HUB_CACHE``, the legacy
    ``HUGGINGFACE_HUB_CACHE``, ``HF_HOME``, ``XDG_CACHE_HOME``); None under its staging mode (left to it)."""
    if os.environ.get("HUGGINGFACE_CO_STAGING", "").strip().upper() in {"1", "ON", "YES", "TRUE"}:
        return None
    home = os.path.expandvars(os.path.expanduser(os.getenv(
        "HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")),
                                "huggingface"))))
    legacy = os.getenv("HUGGINGFACE_HUB_CACHE", os.path.join(home, "hub"))
    return os.path.expandvars(os.path.expanduser(os.getenv("HF_HUB_CACHE", legacy)))


def _in_hf_cache(repo_id: str) -> bool:
    """Whether the Hugging Face cache holds ``repo_id``'s tokenizer: checked without importing transformers
    (which pulls in torch, seconds of start-up that verification does not need otherwise), and without importing
    ``huggingface_hub`` (0.3 s of CPU) when the cache has no folder for the repository at all."""
    cache = _hub_cache_dir()
    if cache is not None and not os.path.isdir(os.path.join(cache, "models--" + repo_id.replace("/", "--"))):
        return False
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub comes with lm-eval
        return False
    return any(isinstance(try_to_load_from_cache(repo_id, f, cache_dir=cache), str)
               for f in ("tokenizer.json", "tokenizer_config.json"))


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}


@functools.lru_cache(maxsize=8)
def load_tokenizer(name: str | None = None, allow_download: bool = True) -> TextEncoder:
    """Load a tokenizer for verification.

    ``None`` or ``"llama3"``: the Llama-3 tokenizer (HF cache, then ``llama-models``, then the Hub).
    Anything else: a Hugging Face tokenizer name or local directory. Raises :class:`TokenizerUnavailable`.
    """
    if name is None or name.lower() in {LLAMA3, "llama-3", "llama_3"}:
        if _in_hf_cache(LLAMA3_HUB_ID):
            try:
                return HFEncoder(_hf_tokenizer(LLAMA3_HUB_ID, local_only=True), LLAMA3_HUB_ID)
            except Exception:  # noqa: BLE001 - incomplete cache: fall through to the package
                pass
        try:
            return TiktokenLlama3Encoder()
        except TokenizerUnavailable as package_error:
            if allow_download and not _offline():
                try:
                    return HFEncoder(_hf_tokenizer(LLAMA3_HUB_ID, local_only=False), LLAMA3_HUB_ID)
                except Exception as hub_error:  # noqa: BLE001
                    raise TokenizerUnavailable(
                        f"no Llama-3 tokenizer: {package_error}; the Hub ({LLAMA3_HUB_ID}, gated) failed too: "
                        f"{type(hub_error).__name__}: {hub_error}"
                    ) from hub_error
            raise TokenizerUnavailable(
                f"no Llama-3 tokenizer: not in the Hugging Face cache and the Hub is not used (offline); "
                f"{INSTALL_HINT} for the offline copy"
            ) from package_error
    try:
        return HFEncoder(_hf_tokenizer(name, local_only=not allow_download or _offline()), name)
    except Exception as exc:  # noqa: BLE001
        raise TokenizerUnavailable(f"cannot load tokenizer {name!r}: {type(exc).__name__}: {exc}") from exc


def as_encoder(tokenizer: TextEncoder | Any | str | None) -> TextEncoder:
    """Coerce None / a name / a Hugging Face tokenizer / a :class:`TextEncoder` into a TextEncoder."""
    if tokenizer is None or isinstance(tokenizer, str):
        return load_tokenizer(tokenizer)
    if isinstance(tokenizer, (HFEncoder, TiktokenLlama3Encoder)):
        return tokenizer
    try:
        from transformers import PreTrainedTokenizerBase

        if isinstance(tokenizer, PreTrainedTokenizerBase):
            return HFEncoder(tokenizer)
    except ImportError:  # pragma: no cover
        pass
    if hasattr(tokenizer, "encode") and isinstance(getattr(tokenizer, "vocab_size", None), int):
        return tokenizer  # type: ignore[return-value]
    raise TypeError(f"not a tokenizer: {type(tokenizer).__name__} (needs encode() and an int vocab_size)")
