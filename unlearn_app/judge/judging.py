"""One judge pass: every item's prompt, the replies (from the cache, else asked in one batch per prompt), their
verdicts (or scores) by the prompt's parse rule, the benchmark's per-item record (TOFU: with ROUGE-L recall of the
same answer), and the benchmark's aggregates per source task."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unlearn_app.judge import cache as verdict_cache
from unlearn_app.judge.ask import JudgeReplyError
from unlearn_app.judge.benchmarks import BENCHMARKS, JudgedBenchmark
from unlearn_app.judge.inputs import Generations, Item
from unlearn_app.judge.prompt_files import Prompt
from unlearn_app.judge.results import PREFIX, Judged

#: Asks the judge: (prompts, max_gen_toks) -> replies.
Asker = Callable[[Sequence[str], int], list[str]]


@dataclass
class Pass:
    tasks: dict[str, tuple[list[Judged], dict[str, float]]] = field(default_factory=dict)
    asked: int = 0  # requests sent to the judge
    cached: int = 0  # replies taken from the cache
    cut: int = 0  # replies longer than MAX_REPLY_CHARS, kept cut


def checked_replies(replies: Sequence[Any], asked: int) -> tuple[list[str], int]:
    """The judge's ``replies`` to ``asked`` prompts, each cut to :data:`MAX_REPLY_CHARS`, and how many were cut;
    :class:`JudgeReplyError` when there is not one text reply per prompt or a reply is no text (a lone surrogate)."""
    if len(replies) != asked or not all(isinstance(r, str) for r in replies):
        raise JudgeReplyError(f"the judge gave {len(replies)} replies to {asked} prompts; check the judge (a server "
                              "must answer each prompt with one choice)")
    for n, reply in enumerate(replies):
        try:
            reply.encode("utf-8")
        except UnicodeEncodeError as e:
            raise JudgeReplyError(f"the judge's reply {n + 1} is no text: it holds a lone surrogate "
                                  f"({reply[e.start]!r} at character {e.start}); check the judge server") from None
    cut = sum(len(r) > verdict_cache.MAX_REPLY_CHARS for r in replies)
    return [r[:verdict_cache.MAX_REPLY_CHARS] for r in replies], cut


def has_chat_template(model: str) -> bool:
    """Whether a local model folder's tokenizer has a chat template (``chat_template.jinja`` or the
    ``chat_template`` of ``tokenizer_config.json``), read without loading it; for a Hub id, the same files in the
    local Hub cache."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        jinja, config = folder / "chat_template.jinja", folder / "tokenizer_config.json"
    else:
        from huggingface_hub import try_to_load_from_cache

        found = [try_to_load_from_cache(model, name) for name in ("chat_template.jinja", "tokenizer_config.json")]
        jinja, config = (Path(f) if isinstance(f, str) else Path("/nonexistent") for f in found)
    if jinja.is_file():
        return True
    try:
        return bool(json.loads(config.read_text()).get("chat_template")) if config.is_file() else False
    except (ValueError, OSError, AttributeError):
        return False


def run_pass(gens: Generations, prompts: Mapping[str, Prompt], judge: Mapping[str, str], chat: bool,
             cache: verdict_cache.VerdictCache, asker: Callable[[], Asker], threshold: float,
             bench: JudgedBenchmark = BENCHMARKS["tofu"]) -> Pass:
    """Judge every item of ``gens`` (generations of ``bench``); ``asker`` makes the judge (called only when a reply
    is not cached)."""
    flat: list[tuple[str, Item, Prompt, str]] = []
    for task, items in gens.items.items():
        for item in items:
            prompt = prompts[item.split]
            key = verdict_cache.key(judge, prompt.identity(), chat, item.question, item.ground_truth, item.answer)
            flat.append((task, item, prompt, key))
    out = Pass()
    missing: dict[str, tuple[Prompt, str]] = {}
    for _, item, prompt, key in flat:
        if cache.get(key) is None and key not in missing:
            missing[key] = (prompt, prompt.render(item.question, item.ground_truth, item.answer))
    out.cached = len(flat) - sum(1 for _, _, _, k in flat if k in missing)
    if missing:
        cache.check_writable()
        ask = asker()
        for name in sorted({p.name for p, _ in missing.values()}):
            keys = [k for k, (p, _) in missing.items() if p.name == name]
            replies, cut = checked_replies(ask([missing[k][1] for k in keys], missing[keys[0]][0].max_gen_toks),
                                           len(keys))
            cache.add(dict(zip(keys, replies, strict=True)))
            out.asked += len(keys)
            out.cut += cut
    for task in gens.items:
        judged = []
        for t, item, prompt, key in flat:
            if t != task:
                continue
            reply = cache.get(key) or ""
            verdict, scores = prompt.verdict(reply)
            record = bench.record(item.split, item.index, verdict, scores, item.ground_truth, item.answer)
            judged.append(Judged(item.split, item.index, item.question, item.ground_truth, item.answer, prompt.name,
                                 reply, record))
        out.tasks[PREFIX + task] = (judged, bench.aggregate([j.record for j in judged], {"rouge_threshold": threshold}))
    return out
