"""``unlearn judge``: a model as judge of a run's generated TOFU answers (does the forget answer reveal the fact?
is the retain / real-authors / world-facts answer still correct?), with per-item verdicts, aggregates and the
judge's agreement with ROUGE-L recall, or of MLLMU-Bench's generated answers (a 1-10 factuality score), in lm-eval's
results schema (:mod:`unlearn_app.judge`)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from unlearn_app import output_guard
from unlearn_app.argtypes import float_range, positive_int
from unlearn_app.commands import DefaultsHelpFormatter, error, model_problem

ORDER = 37
#: What a server URL must look like (lm-eval posts the requests to it as given).
_URL = re.compile(r"https?://[^\s/]+(/\S*)?")


def _out_folder(args: argparse.Namespace) -> Path:
    """``--out``, or ``judge_<RUN's name>`` in the working folder."""
    name = Path(args.run).expanduser().absolute()
    name = name.parent if name.is_file() else name
    return Path(args.out or f"judge_{name.name}").expanduser()


def _cache_folder(args: argparse.Namespace) -> tuple[Path, str]:
    """The reply cache's folder and where it comes from (``--cache-dir``, ``$UNLEARN_JUDGE_CACHE``, the default)."""
    from unlearn_app.judge.cache import cache_dir

    if args.cache_dir:
        return Path(args.cache_dir).expanduser(), "--cache-dir"
    return cache_dir(), "$UNLEARN_JUDGE_CACHE" if os.environ.get("UNLEARN_JUDGE_CACHE") else "the default cache"


def _cache_clash(args: argparse.Namespace, out: Path) -> str | None:
    """Why ``out`` may not be written: it is, holds or lies inside the reply cache's folder (existing or not: the
    run itself creates it), where ``--overwrite`` would delete the cached replies."""
    folder, source = _cache_folder(args)
    cache, target = folder.resolve(), out.resolve()
    if target == cache:
        why = "is"
    elif cache.is_relative_to(target):
        why = "holds"
    elif target.is_relative_to(cache):
        why = "lies inside"
    else:
        return None
    return (f"--out {out} {why} the judge's reply cache {folder} ({source}); writing it could destroy the cached "
            "replies. Choose an --out outside the cache.")


def _problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line, found without a model or lm-eval (cheap checks first)."""
    from unlearn_app.judge.ask import SERVER_BACKENDS

    if not Path(args.run).expanduser().exists():
        return (f"{args.run} does not exist; give lm-eval's samples file or output folder (--log_samples), an "
                "`unlearn run` folder or an open-unlearning evaluation folder.")
    if args.backend in SERVER_BACKENDS:
        if not args.base_url or not _URL.fullmatch(args.base_url):
            return (f"--backend {args.backend} needs --base-url, the server's URL (e.g. "
                    "http://127.0.0.1:8000/v1/completions, or .../v1/chat/completions for chat)")
        return None
    if args.base_url:
        return f"--base-url is for the server backends ({', '.join(SERVER_BACKENDS)}), not --backend {args.backend}"
    return model_problem(args.judge, "--judge")


def _cmd_judge(args: argparse.Namespace) -> int:
    from unlearn_app.judge.prompt_files import PromptError, family_benchmark, family_prompts

    problem = _problem(args)
    if problem:
        return error(problem)
    try:
        prompts = family_prompts(args.prompts)
        bench = family_benchmark(prompts.values())
    except PromptError as e:
        return error(str(e))
    if args.rouge_threshold is None:
        from unlearn_app.judge.results import ROUGE_THRESHOLD

        args.rouge_threshold = ROUGE_THRESHOLD
    elif not bench.uses_rouge:
        return error(f"--rouge-threshold is for the TOFU prompt families (ROUGE's agreement with the judge); "
                     f"--prompts {args.prompts} does not compare with ROUGE: leave it out")
    out = _out_folder(args)
    try:  # the default folder is known only now: checked like a declared output, before anything is written
        output_guard.check(args, [("out", out)] if not args.out else [])
    except output_guard.OutputClash as e:
        return error(str(e))
    clash = _cache_clash(args, out)
    if clash:
        return error(clash)
    from unlearn_app.judge.inputs import JudgeInputError, read_generations

    try:
        gens = read_generations(args.run, bench)
    except JudgeInputError as e:
        return error(str(e))
    return _judge(args, gens, prompts, out, bench)


def _judge(args: argparse.Namespace, gens, prompts, out: Path, bench) -> int:
    from harness_ext.provenance import git_commit, package_version
    from unlearn_app.judge import ask
    from unlearn_app.judge.cache import VerdictCache
    from unlearn_app.judge.judging import has_chat_template, run_pass
    from unlearn_app.judge.results import stamp, write_outputs

    spec = ask.JudgeSpec(args.judge, args.backend, args.base_url, args.judge_revision, args.batch_size, args.device,
                         None if args.chat_template == "auto" else args.chat_template == "yes")
    judge = ask.identity(spec)
    if args.backend == "local-chat-completions":
        chat = True
    elif args.backend == "local-completions":
        chat = False
    else:
        chat = spec.chat_template if spec.chat_template is not None else has_chat_template(args.judge)
    from unlearn_app.judge.cache import MAX_REPLY_CHARS, CacheError

    server = args.backend in ask.SERVER_BACKENDS

    def asker():
        lm = ask.make_lm(spec)
        return lambda texts, max_gen_toks: ask.ask(lm, texts, max_gen_toks, chat, server)

    try:
        cache = VerdictCache(_cache_folder(args)[0])
        done = run_pass(gens, prompts, judge, chat, cache, asker, args.rouge_threshold, bench)
    except (CacheError, ask.JudgeReplyError) as e:
        return error(str(e))
    except ModuleNotFoundError as e:
        return error(f"--backend {args.backend} lacks a package ({e.name or str(e)[:160]}); server backends need "
                     "pip install 'lm-eval-unlearning[api]', vllm needs pip install vllm")
    except OSError as e:
        return error(f"the judge could not be asked ({type(e).__name__}: {str(e)[:200]})")
    used = {s: p.identity() for s, p in prompts.items()}
    modes = {"judge": f"{judge['model']}@{judge['revision']}", "prompts": args.prompts,
             **({"rouge_threshold": args.rouge_threshold} if bench.uses_rouge else {}), "chat_template": chat}
    provenance = {"package": "lm-eval-unlearning", "version": package_version(), "git_commit": git_commit(),
                  "metric_modes": modes, "reference": None, "judge": judge, "prompts": used,
                  "generations": {"kind": gens.kind, "files": [f.name for f in gens.files]}}
    with output_guard.replaced_folder(out) as folder:
        write_outputs(folder, done.tasks, provenance, stamp(), bench.lower_is_better())
    revision = judge["revision"][:19] if judge["revision"].startswith("sha256:") else judge["revision"]
    if done.cut:
        print(f"note: {done.cut} of the judge's replies were longer than {MAX_REPLY_CHARS:,} characters; each is "
              "kept cut to that length (in the cache and the samples file) and its verdict read from what is kept",
              file=sys.stderr)
    print(f"judge {judge['model']} ({judge['backend']}, revision {revision}), prompts {args.prompts}; "
          f"{done.asked} asked, {done.cached} from the cache ({cache.path})")
    for task, (judged, metrics) in done.tasks.items():
        print(f"{task}: {len(judged)} answers")
        for name, value in metrics.items():
            print(f"  {name:<32} {value:.4g}")
    print(f"written: {out}")
    return 0


def add_parsers(sub) -> None:
    from unlearn_app.judge.ask import BACKENDS
    from unlearn_app.judge.results import ROUGE_THRESHOLD

    p = sub.add_parser(
        "judge", help="A model as judge of a run's generated TOFU answers (revealed? still correct?) or MLLMU-Bench "
        "answers (1-10 factuality).",
        description="Ask a judge model, through lm-eval's own model classes, whether each generated forget answer "
        "of RUN reveals the ground truth's fact and whether each retain / real-authors / world-facts answer is still "
        "correct (or, with --prompts mllmu-factuality, score each MLLMU-Bench generated answer 1-10 for factuality "
        "against its ground truth); write per-item verdicts and their shares (with unparsable replies counted, and the agreement with "
        "ROUGE-L recall) as an lm-eval results folder that `unlearn report`, `unlearn ci --from-results` and "
        "`unlearn submit` read. Replies are cached: a rerun asks nothing it asked before. See docs/judge.md.",
        formatter_class=DefaultsHelpFormatter)
    p.add_argument("run", metavar="RUN", help="lm-eval's samples_<task>_*.jsonl file or output folder (run with "
                   "--log_samples on tofu_forgetNN or tofu_forgetNN_rouge; for mllmu-factuality on "
                   "mllmu_forgetNN_image or _text), an `unlearn run` folder, or an "
                   "open-unlearning evaluation folder (TOFU_EVAL.json).")
    p.add_argument("--judge", required=True, metavar="MODEL", help="The judge: a model folder or Hub id (hf, vllm), "
                   "or the model name the server serves (local-completions, local-chat-completions).")
    p.add_argument("--backend", default="hf", choices=BACKENDS, help="lm-eval's model class that asks the judge. "
                   "A served instruct (chat) judge: local-chat-completions (local-completions sends the bare prompt, "
                   "and a chat model then answers in sentences the parse rule cannot read).")
    p.add_argument("--base-url", dest="base_url", help="The server's completions URL (server backends only).")
    p.add_argument("--judge-revision", dest="judge_revision", help="The judge's Hub revision; for a served model, "
                   "the revision to record (default: a folder's file hash, the Hub cache's commit, or 'unknown').")
    p.add_argument("--prompts", default="yes-no", help="The prompt family: yes-no (this package's), or ou-pr133 "
                   "(the 0-10 scores of open-unlearning's LLM-judge pull request), for TOFU; mllmu-factuality (the "
                   "1-10 factuality score of MLLMU-Bench's release, in this package's wording) for MLLMU-Bench.")
    p.add_argument("--chat-template", dest="chat_template", default="auto", choices=("auto", "yes", "no"),
                   help="Send each prompt through the judge's chat template (hf, vllm; auto: when its tokenizer "
                   "has one). Chat completions always use the server's, plain completions never.")
    p.add_argument("--rouge-threshold", dest="rouge_threshold", type=float_range(0.0, 1.0), default=None,
                   help="TOFU families: ROUGE-L recall at or above which ROUGE counts an answer as carrying the fact (for the "
                   f"agreement with the judge; default {ROUGE_THRESHOLD}). Refused with a family that does not use ROUGE.")
    p.add_argument("--batch-size", dest="batch_size", type=positive_int, default=8, help="hf / vllm batch size.")
    p.add_argument("--device", help="hf device (default: cuda when torch sees a GPU, else cpu).")
    p.add_argument("--cache-dir", dest="cache_dir", help="The reply cache folder (default: $UNLEARN_JUDGE_CACHE, "
                   "else ~/.cache/lm-eval-unlearning/judge); --out may not be, hold or lie inside it.")
    p.add_argument("--out", help="The output folder (default: judge_<RUN's name> in the working folder); with "
                   "--overwrite an existing one is replaced as a whole.")
    p.set_defaults(func=_cmd_judge)
    output_guard.declare(p, outputs=["out"], inputs=["cache_dir", "judge"],
                         scanned={"run": (*output_guard.RUN_FILES, "samples_*.jsonl")}, folders=["out"])
