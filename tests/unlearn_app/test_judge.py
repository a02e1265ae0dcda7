"""``unlearn judge``: the parse rules, aggregates and agreement with ROUGE-L recall by hand; the judge asked through
lm-eval's own classes (a stand-in OpenAI-compatible server on 127.0.0.1 for local-completions and
local-chat-completions, a tiny Llama rigged to say Yes for hf); the reply cache (a rerun asks nothing); provenance;
bad input; and the output read by `unlearn report`, `unlearn ci --from-results` and the leaderboard."""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import pytest

from fixtures.commands import run_unlearn_here
from fixtures.judge_server import ITEMS, STAMP, TASK, judge_server, rigged_llama, write_ou_run, write_samples_run
from unlearn_app.cli import main
from unlearn_app.judge.cache import MAX_REPLY_CHARS
from unlearn_app.judge.prompt_files import FOLDER, family_prompts
from unlearn_tasks.metrics import judge as verdicts

JUDGED = f"judge_{TASK}"
NAN = math.nan
#: What the stand-in server's rule gives on ITEMS, by hand: forget: Yes (the answer is the truth, ROUGE 1), No
#: ("She wrote poems about trees." vs "She wrote The Salt Harbour.": ROUGE-L recall 2/5 < 0.5), unparsable
#: ("garbled"); so revealed 1/2, the two parsable items agree with ROUGE (agreement 1, p_e = 0.5, kappa 1). Retain:
#: Yes, Yes (ROUGE 1, 1): correct 1, agreement 1, kappa undefined (p_e = 1). ra: No, ROUGE 0: correct 0, agreement 1,
#: kappa undefined. wf: Yes, ROUGE 1: correct 1.
EXPECTED = {
    "forget_judge_revealed": 0.5, "forget_judge_unparsable": 1.0, "forget_judge_rouge_agreement": 1.0,
    "forget_judge_rouge_kappa": 1.0,
    "retain_judge_correct": 1.0, "retain_judge_unparsable": 0.0, "retain_judge_rouge_agreement": 1.0,
    "retain_judge_rouge_kappa": NAN,
    "ra_judge_correct": 0.0, "ra_judge_unparsable": 0.0, "ra_judge_rouge_agreement": 1.0, "ra_judge_rouge_kappa": NAN,
    "wf_judge_correct": 1.0, "wf_judge_unparsable": 0.0, "wf_judge_rouge_agreement": 1.0, "wf_judge_rouge_kappa": NAN,
}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(math.isnan(a[k]) and math.isnan(b[k]) or a[k] == pytest.approx(b[k]) for k in a)


def results(out: Path) -> dict:
    return json.loads(next(out.glob("results_*.json")).read_text())


def metrics(out: Path, task: str = JUDGED) -> dict[str, float]:
    from harness_ext.results import task_metrics

    return task_metrics(results(out))[task]


def samples(out: Path, task: str = JUDGED) -> list[dict]:
    return [json.loads(x) for x in next(out.glob(f"samples_{task}_*.jsonl")).read_text().splitlines()]


def judge(run: Path, out: Path, url: str, *extra: str, backend: str = "local-completions") -> int:
    path = "/chat/completions" if backend == "local-chat-completions" else "/completions"
    return main(["judge", str(run), "--judge", "judge-x", "--backend", backend, "--base-url", url + path,
                 "--cache-dir", str(out.parent / "cache"), "--out", str(out), *extra])


# --------------------------------------------------------------------------- pure parts, by hand
@pytest.mark.parametrize("text, verdict", [
    ("Yes", "yes"), (" yes, it does.", "yes"), ("**No**", "no"), ("No.", "no"), ("\n\"Yes\"", "yes"),
    ("Perhaps.", "unparsable"), ("", "unparsable"), ("YesYes", "unparsable"), ("The answer is yes", "unparsable"),
    ("1. Yes", "unparsable"),
])
def test_yes_no_rule_reads_the_first_word_only(text, verdict):
    assert verdicts.parse_yes_no(text) == verdict


def test_json_score_rule_takes_the_last_object_with_exactly_its_keys():
    keys = ("KNOWLEDGE_REMOVAL", "FLUENCY")
    text = 'Reasoning ... {"x": 1}\nJSON Summary:\n{"KNOWLEDGE_REMOVAL": 3, "FLUENCY": 9}'
    assert verdicts.parse_json_scores(text, keys) == {"KNOWLEDGE_REMOVAL": 3.0, "FLUENCY": 9.0}
    assert verdicts.parse_json_scores('{"KNOWLEDGE_REMOVAL": 3}', keys) is None  # a key missing
    assert verdicts.parse_json_scores('{"KNOWLEDGE_REMOVAL": 11, "FLUENCY": 1}', keys) is None  # off the 0-10 scale
    assert verdicts.parse_json_scores("no object", keys) is None
    assert verdicts.verdict_from_score(4.0, 5, yes_below=True) == "yes"
    assert verdicts.verdict_from_score(5.0, 5, yes_below=True) == "no"
    assert verdicts.verdict_from_score(5.0, 5, yes_below=False) == "yes"
    assert verdicts.verdict_from_score(None, 5, yes_below=False) == "unparsable"


def test_agreement_and_kappa_by_hand():
    """Parsable pairs (judge, ROUGE >= 0.5): (y,y) (y,y) (y,n) (n,n) (n,n): p_o = 4/5; judge says yes 3/5, ROUGE 2/5,
    p_e = 0.6 * 0.4 + 0.4 * 0.6 = 0.48; kappa = (0.8 - 0.48) / 0.52. The unparsable item is left out."""
    v = ["yes", "yes", "yes", "no", "no", "unparsable"]
    r = [0.9, 0.5, 0.1, 0.2, 0.49, 1.0]
    agree, kappa = verdicts.agreement(v, r, 0.5)
    assert agree == pytest.approx(0.8) and kappa == pytest.approx(0.32 / 0.52)
    assert verdicts.agreement(v, r, 0.05)[0] == pytest.approx(3 / 5)  # a lower threshold: ROUGE says yes to all
    assert all(math.isnan(x) for x in verdicts.agreement(["unparsable"], [1.0], 0.5))


def test_kappa_where_the_judges_share_is_not_one_minus_rouges():
    """The fixtures above have the judge's share of yes equal to 1 - ROUGE's (p_e = 2a(1 - a) either way). Here the
    judge says yes 4/5, ROUGE 2/5: pairs (y,y) (y,y) (y,n) (y,n) (n,n): p_o = 3/5, p_e = 0.8 * 0.4 + 0.2 * 0.6 =
    0.44, kappa = 0.16 / 0.56 = 2/7 (a p_e taken as 2ab would give -1/9, as 2a(1 - a) 0.28/0.68)."""
    agree, kappa = verdicts.agreement(["yes", "yes", "yes", "yes", "no"], [0.7, 0.5, 0.2, 0.0, 0.3], 0.5)
    assert agree == pytest.approx(3 / 5) and kappa == pytest.approx(2 / 7)
    # and swapped: the judge yes 1/5, ROUGE 3/5: (y,y) (n,y) (n,y) (n,n) (n,n): p_o 3/5, p_e 0.2*0.6 + 0.8*0.4 = 0.44
    assert verdicts.agreement(["yes", "no", "no", "no", "no"], [0.9, 0.6, 0.5, 0.1, 0.0], 0.5)[1] == pytest.approx(
        (0.6 - 0.44) / 0.56)


def test_aggregate_by_hand():
    recs = [{"split": "forget", "verdict": v, "rougeL_recall": r} for v, r in
            (("yes", 1.0), ("no", 0.0), ("no", 0.8), ("unparsable", 0.0))] + [
        {"split": "wf", "verdict": "yes", "rougeL_recall": 0.0}]
    out = verdicts.aggregate(recs, 0.5)
    # forget: 1 of 3 parsable revealed; pairs (y,y) (n,n) (n,y): p_o 2/3, p_e 1/3*2/3 + 2/3*1/3 = 4/9
    assert out["forget_judge_revealed"] == pytest.approx(1 / 3) and out["forget_judge_unparsable"] == 1
    assert out["forget_judge_rouge_agreement"] == pytest.approx(2 / 3)
    assert out["forget_judge_rouge_kappa"] == pytest.approx((2 / 3 - 4 / 9) / (1 - 4 / 9))
    assert out["wf_judge_correct"] == 1.0 and "retain_judge_correct" not in out
    assert verdicts.lower_is_better() == {"forget_judge_revealed", "forget_judge_unparsable",
                                          "retain_judge_unparsable", "ra_judge_unparsable", "wf_judge_unparsable"}


def test_prompt_files_are_versioned_hashed_and_fill_fields_once():
    yes_no, pr133 = family_prompts("yes-no"), family_prompts("ou-pr133")
    assert {s: p.name for s, p in yes_no.items()} == {"forget": "yes-no-forget", "retain": "yes-no-correct",
                                                      "ra": "yes-no-correct", "wf": "yes-no-correct"}
    assert yes_no["forget"].sha256 == hashlib.sha256((FOLDER / "yes_no_forget.txt").read_bytes()).hexdigest()
    text = yes_no["forget"].render("Q {answer}?", "T", "A")
    assert "Question: Q {answer}?\n" in text and "Answer to check: A\n" in text  # a field inside a field stays
    forget = pr133["forget"]
    assert forget.max_gen_toks == 512 and "MIT License" in (FOLDER / "ou_pr133_forget.txt").read_text()
    reply = 'Reasoning: ...\nJSON Summary:\n{"KNOWLEDGE_REMOVAL": 2, "VERBATIM_REMOVAL": 4, "FLUENCY": 8}'
    assert forget.verdict(reply) == ("yes", {"KNOWLEDGE_REMOVAL": 2.0, "VERBATIM_REMOVAL": 4.0, "FLUENCY": 8.0})
    assert pr133["retain"].verdict('{"RETENTION_SCORE": 7, "ACCURACY": 7, "RELEVANCE": 7, "FLUENCY": 7}')[0] == "yes"
    assert pr133["retain"].verdict('{"RETENTION_SCORE": 7}')[0] == "unparsable"


# --------------------------------------------------------------------------- through lm-eval's classes
def test_local_completions_sends_greedy_prompts_and_a_rerun_asks_nothing(tmp_path, capsys):
    run = write_samples_run(tmp_path / "run")
    with judge_server() as server:
        assert judge(run, tmp_path / "a", server.url, "--judge-revision", "r1") == 0
        assert len(server.requests) == len(ITEMS)
        path, body = server.requests[0]
        assert path == "/v1/completions" and body["model"] == "judge-x" and body["max_tokens"] == 8
        assert body["temperature"] == 0 and body["prompt"].endswith("Reply with one word, Yes or No.\nReply:\n")
        prompts = family_prompts("yes-no")
        sent = sorted(b["prompt"] for _, b in server.requests)  # one prompt per request (lm-eval's batch size 1)
        assert sent == sorted(prompts[s].render(q, t, g) for s, q, t, g in ITEMS)  # the rendered prompts, as is
        assert same(metrics(tmp_path / "a"), EXPECTED)
        capsys.readouterr()
        assert judge(run, tmp_path / "b", server.url, "--judge-revision", "r1") == 0  # the rerun
        assert len(server.requests) == len(ITEMS)  # zero requests the second time
        assert f"0 asked, {len(ITEMS)} from the cache" in capsys.readouterr().out
        assert same(metrics(tmp_path / "b"), EXPECTED)
        assert judge(run, tmp_path / "c", server.url, "--judge-revision", "r2") == 0  # another revision: asked
        assert len(server.requests) == 2 * len(ITEMS)
    rows = samples(tmp_path / "a")
    assert [r["judge"]["verdict"] for r in rows] == ["yes", "no", "unparsable", "yes", "yes", "no", "yes"]
    assert rows[2]["reply"] == " Perhaps." and rows[1]["judge"]["rougeL_recall"] == pytest.approx(0.4)
    assert rows[0]["doc"] == {"split": "forget", "index": 0, "question": ITEMS[0][1], "ground_truth": ITEMS[0][2],
                              "answer": ITEMS[0][3]}


def test_local_chat_completions_sends_one_user_turn(tmp_path):
    run = write_samples_run(tmp_path / "run")
    with judge_server() as server:
        assert judge(run, tmp_path / "out", server.url, backend="local-chat-completions") == 0
        path, body = server.requests[0]
    assert path == "/v1/chat/completions" and body["max_tokens"] == 8 and body["temperature"] == 0
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert same(metrics(tmp_path / "out"), EXPECTED)
    assert results(tmp_path / "out")["configs"][JUDGED]["provenance"]["metric_modes"]["chat_template"] is True


def test_open_unlearning_pr133_prompts_through_the_server(tmp_path):
    """The 0-10 prompts: 512 new tokens, the JSON summary read into the same verdicts (knowledge removal 0 of 10:
    revealed; retention 10: correct; no summary: unparsable), the scores kept per item."""
    run = write_samples_run(tmp_path / "run")
    with judge_server() as server:
        assert judge(run, tmp_path / "out", server.url, "--prompts", "ou-pr133") == 0
        _, body = server.requests[0]
    assert body["max_tokens"] == 512 and "You are an expert evaluator" in body["prompt"]
    assert same(metrics(tmp_path / "out"), EXPECTED)
    rows = samples(tmp_path / "out")
    assert rows[0]["prompt"] == "ou-pr133-forget" and rows[0]["judge"]["scores"] == {
        "KNOWLEDGE_REMOVAL": 0.0, "VERBATIM_REMOVAL": 5.0, "FLUENCY": 5.0}
    assert "scores" not in rows[2]["judge"] and rows[2]["judge"]["verdict"] == "unparsable"


def test_provenance_names_the_judge_its_revision_and_each_prompt_by_hash(tmp_path):
    run = write_samples_run(tmp_path / "run")
    with judge_server() as server:
        assert judge(run, tmp_path / "out", server.url, "--judge-revision", "abc123") == 0
    raw = results(tmp_path / "out")
    prov = raw["configs"][JUDGED]["provenance"]
    assert prov["judge"] == {"model": "judge-x", "backend": "local-completions", "revision": "abc123",
                             "server": server.url + "/completions"}
    digest = hashlib.sha256((FOLDER / "yes_no_correct.txt").read_bytes()).hexdigest()
    assert prov["prompts"]["retain"] == {"name": "yes-no-correct", "version": "1", "sha256": digest}
    assert prov["metric_modes"] == {"judge": "judge-x@abc123", "prompts": "yes-no", "rouge_threshold": 0.5,
                                    "chat_template": False}
    assert prov["generations"] == {"kind": "lm-eval", "files": [f"samples_{TASK}_{STAMP}.jsonl"]}
    assert raw["higher_is_better"][JUDGED]["forget_judge_revealed"] is False
    assert raw["higher_is_better"][JUDGED]["retain_judge_correct"] is True


def test_open_unlearning_folder_and_unlearn_run_folder_are_read(tmp_path):
    ou = write_ou_run(tmp_path / "ou")
    ckpt = tmp_path / "ckpt"
    write_samples_run(ckpt / "eval" / "model")
    (ckpt / "unlearn_config.yaml").write_text("method: ga\n")
    with judge_server() as server:
        assert judge(ou, tmp_path / "o1", server.url) == 0
        assert judge(ckpt, tmp_path / "o2", server.url) == 0
        assert len(server.requests) == len(ITEMS)  # the same generations: the second run is cached
    assert same(metrics(tmp_path / "o1", "judge_tofu"), EXPECTED)  # seven items: no TOFU forget size, so `tofu`
    assert same(metrics(tmp_path / "o2"), EXPECTED)


def test_hf_backend_with_a_judge_that_always_says_yes(tmp_path, monkeypatch):
    """A tiny Llama rigged so that its greedy reply is " Yes Yes ...": every answer is revealed / correct. Run as
    docs/judge.md shows the command (no --device, no --cache-dir) on a machine where torch sees no GPU: lm-eval's hf
    default device, "cuda", would fail there."""
    import torch

    model = rigged_llama(tmp_path / "yes_judge", " Yes")
    write_samples_run(tmp_path / "eval" / "npo")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("UNLEARN_JUDGE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert main(["judge", "eval/npo", "--judge", str(model), "--out", "judged/npo"]) == 0
    assert (tmp_path / "xdg" / "lm-eval-unlearning" / "judge" / "verdicts.jsonl").is_file()
    out = tmp_path / "judged" / "npo"
    got = metrics(out)
    assert got["forget_judge_revealed"] == 1.0 and got["forget_judge_unparsable"] == 0.0
    assert got["retain_judge_correct"] == got["ra_judge_correct"] == got["wf_judge_correct"] == 1.0
    assert got["forget_judge_rouge_agreement"] == pytest.approx(1 / 3)  # ROUGE says yes to the first forget answer only
    rows = samples(out)
    assert rows[0]["reply"].split()[0] == "Yes"
    prov = results(out)["configs"][JUDGED]["provenance"]["judge"]
    from harness_ext.provenance import path_fingerprint

    # the files' hashes as the provenance module takes them (no symbolic link in this folder)
    assert prov == {"model": "yes_judge", "backend": "hf", "revision": f"sha256:{path_fingerprint(model)}"}


def test_the_hf_judge_gets_the_cpu_when_torch_sees_no_gpu(monkeypatch):
    """lm-eval's hf class defaults to "cuda", which fails on a machine without a GPU; the judge is given cuda only
    when torch sees one (lm-eval's own fallback), and --device as given."""
    import lm_eval.api.registry
    import torch

    from unlearn_app.judge.ask import JudgeSpec, make_lm

    seen: list[dict] = []
    monkeypatch.setattr(lm_eval.api.registry, "get_model", lambda name: lambda **kw: seen.append({name: kw}))
    for cuda, device in ((False, None), (True, None), (False, "mps")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        make_lm(JudgeSpec("org/judge", device=device))
    make_lm(JudgeSpec("judge-x", "local-completions", "http://127.0.0.1:1/v1/completions"))
    assert [s.get("hf", {}).get("device") for s in seen[:3]] == ["cpu", "cuda", "mps"]
    assert "device" not in seen[3]["local-completions"]


# --------------------------------------------------------------------------- bad input
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    run = write_samples_run(tmp_path / "run")
    link = tmp_path / "link.jsonl"
    os.symlink(next(run.glob("samples_*")), link)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / f"samples_{TASK}_{STAMP}.jsonl").write_text('{"doc_id": 0, "doc": {"split": "forget"}, "filtered_resps": '
                                                        '["x"]}\n')
    surrogate = write_samples_run(tmp_path / "surrogate", [("forget", "Q?", "T.", "Yes \udc80")])  # "\\udc80" in JSON
    ou_keys = {}
    for name, key in (("long", "9" * 5000), ("arabic", "\u0663")):  # 5000 digits; ARABIC-INDIC DIGIT THREE
        ou_keys[name] = write_ou_run(tmp_path / f"ou_{name}")
        logs = json.loads((ou_keys[name] / "TOFU_EVAL.json").read_text())
        logs["forget_Q_A_ROUGE"]["value_by_index"][key] = logs["forget_Q_A_ROUGE"]["value_by_index"].pop("0")
        (ou_keys[name] / "TOFU_EVAL.json").write_text(json.dumps(logs))
    cases = [
        ([str(tmp_path / "missing"), "--judge", "j"], "does not exist"),
        ([str(link), "--judge", "j", "--backend", "local-completions", "--base-url", "http://127.0.0.1:1/v1"],
         "is a symbolic link"),
        ([str(run), "--judge", "j", "--backend", "local-completions"], "needs --base-url"),
        ([str(run), "--judge", "j", "--prompts", "nope", "--base-url", "http://x/v1", "--backend",
          "local-completions"], "no such prompt family; known: mllmu-factuality, ou-pr133, yes-no"),
        ([str(bad), "--judge", "j", "--backend", "local-completions", "--base-url", "http://127.0.0.1:1/v1"],
         "No lm-eval results_*.json"),
        ([str(bad / f"samples_{TASK}_{STAMP}.jsonl"), "--judge", "j", "--backend", "local-completions",
          "--base-url", "http://127.0.0.1:1/v1"], "needs an integer index and the question"),
        ([str(run), "--judge", "j", "--backend", "local-completions", "--base-url", "http://127.0.0.1:1/v1",
          "--out", str(run)], "--out"),
        ([str(surrogate), "--judge", "j", "--backend", "local-completions", "--base-url", "http://127.0.0.1:1/v1"],
         "document 0: its generation is no text: it holds a lone surrogate ('\\udc80' at character 4)"),
        ([str(ou_keys["long"]), "--judge", "j", "--backend", "local-completions", "--base-url",
          "http://127.0.0.1:1/v1"], "value_by_index['99999999999999999999... (5000 characters)']: not an item"),
        ([str(ou_keys["arabic"]), "--judge", "j", "--backend", "local-completions", "--base-url",
          "http://127.0.0.1:1/v1"], "value_by_index['\u0663']: not an item (an object under an index of at most 9 ASCII"),
    ]
    for argv, message in cases:
        capsys.readouterr()
        assert main(["judge", *argv, "--cache-dir", str(tmp_path / "cache")]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in run.iterdir()) == [f"results_{STAMP}.json", f"samples_{TASK}_{STAMP}.jsonl"]
    assert not (tmp_path / "cache").exists()


def test_a_server_that_is_down_is_one_line(tmp_path, capsys):
    run = write_samples_run(tmp_path / "run")
    assert main(["judge", str(run), "--judge", "j", "--backend", "local-completions", "--base-url",
                 "http://127.0.0.1:9/v1/completions", "--cache-dir", str(tmp_path / "c"),
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "error: the judge could not be asked (ConnectionError" in err[-1]  # after lm-eval's progress bar
    assert not (tmp_path / "out").exists()


def _choice(text: str) -> bytes:
    return json.dumps({"choices": [{"index": 0, "text": text}]}).encode()


@pytest.mark.parametrize("body, message", [
    (b'{"choices": []}', "prompt(s) with fewer choices (OpenAI's completions schema gives one per prompt)"),
    (_choice("Yes \ud800"), "reply 1 is no text: it holds a lone surrogate ('\\ud800' at character 4)"),
    (b'{"choices": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "schema (RecursionError"),
    (b'{"choices": [{"index": 0, "text": "Yes"}], "n": ' + b"7" * 5000 + b"}", "schema (ValueError: Exceeds the limit"),
], ids=["no-choices", "lone-surrogate", "nested-200k", "int-5000-digits"])
def test_a_hostile_server_reply_is_one_line_and_writes_nothing(tmp_path, capsys, body, message):
    run = write_samples_run(tmp_path / "run")
    with judge_server(raw=body) as server:
        done = run_unlearn_here(["judge", run, "--judge", "j", "--backend", "local-completions", "--base-url",
                                 server.url + "/completions", "--cache-dir", tmp_path / "cache", "--out",
                                 tmp_path / "out"], capsys)
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert done.returncode == 2 and len(errors) == 1 and message in errors[0], done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()  # no empty verdicts.jsonl either


def test_a_reply_above_the_limit_is_kept_cut_with_a_note(tmp_path, capsys):
    """A server answering 40,000 characters (its first word Yes): the reply is kept cut to MAX_REPLY_CHARS in the
    cache and the samples file, said once; the verdict is read from what is kept."""
    run = write_samples_run(tmp_path / "run")
    reply = "Yes " + "x" * 40_000
    with judge_server(raw=_choice(reply)) as server:
        done = run_unlearn_here(["judge", run, "--judge", "j", "--backend", "local-completions", "--base-url",
                                 server.url + "/completions", "--cache-dir", tmp_path / "cache", "--out",
                                 tmp_path / "out"], capsys)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(f"note: {len(ITEMS)} of the judge's replies were longer than 32,768 characters") == 1
    cached = [json.loads(x)["reply"] for x in (tmp_path / "cache" / "verdicts.jsonl").read_text().splitlines()]
    assert cached == [reply[:MAX_REPLY_CHARS]] * len(ITEMS) and MAX_REPLY_CHARS == 32_768
    rows = samples(tmp_path / "out")
    assert [r["reply"] for r in rows] == cached and {r["judge"]["verdict"] for r in rows} == {"yes"}


# --------------------------------------------------------------------------- the reply cache is never lost
@pytest.mark.parametrize("source", ["--cache-dir new X, --out X", "--cache-dir, --out inside it",
                                    "UNLEARN_JUDGE_CACHE, --out holding it", "the default, --out inside it"])
def test_an_output_that_is_holds_or_lies_inside_the_cache_is_refused(tmp_path, capsys, monkeypatch, source):
    run = write_samples_run(tmp_path / "run")
    monkeypatch.delenv("UNLEARN_JUDGE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    default = tmp_path / "xdg" / "lm-eval-unlearning" / "judge"
    cache, extra = {
        "--cache-dir new X, --out X": (tmp_path / "x", ["--cache-dir", tmp_path / "x", "--out", tmp_path / "x"]),
        "--cache-dir, --out inside it": (tmp_path / "c", ["--cache-dir", tmp_path / "c", "--out", tmp_path / "c/o"]),
        "UNLEARN_JUDGE_CACHE, --out holding it": (tmp_path / "env/c", ["--out", tmp_path / "env"]),
        "the default, --out inside it": (default, ["--out", default / "o"]),
    }[source]
    if source.startswith("UNLEARN"):
        monkeypatch.setenv("UNLEARN_JUDGE_CACHE", str(cache))
    if source != "--cache-dir new X, --out X":  # an existing cache, replaced whole by --overwrite if not refused
        cache.mkdir(parents=True)
        (cache / "verdicts.jsonl").write_text('{"key": "k", "reply": "Yes"}\n')
    with judge_server() as server:
        done = run_unlearn_here(["judge", run, "--judge", "j", "--backend", "local-completions", "--base-url",
                                 server.url + "/completions", *extra, "--overwrite"], capsys)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert not server.requests
    assert "the judge's reply cache" in done.stderr or "the input --cache-dir" in done.stderr  # the general guard's
    if source == "--cache-dir new X, --out X":
        assert not cache.exists()
    else:
        assert (cache / "verdicts.jsonl").read_text() == '{"key": "k", "reply": "Yes"}\n'
        assert sorted(p.name for p in cache.parent.iterdir() if p.name.startswith(".")) == []


def test_a_last_line_cut_by_a_crash_is_dropped_once_not_appended_onto(tmp_path, capsys):
    run = write_samples_run(tmp_path / "run")
    cache = tmp_path / "cache" / "verdicts.jsonl"
    cache.parent.mkdir()
    cache.write_text('{"key": "k0", "reply": "Yes"}\n{"key": "k1", "rep')
    with judge_server() as server:
        args = ["judge", run, "--judge", "j", "--backend", "local-completions", "--base-url",
                server.url + "/completions", "--cache-dir", cache.parent, "--out", tmp_path / "out"]
        first = run_unlearn_here(args, capsys)
        second = run_unlearn_here([*args, "--overwrite"], capsys)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stderr.count("ended in a line cut by a crash (18 bytes); dropped it") == 1
    assert "cut by a crash" not in second.stderr and len(server.requests) == len(ITEMS)  # the rerun asks nothing
    rows = [json.loads(x) for x in cache.read_text().splitlines()]  # every line whole
    assert len(rows) == 1 + len(ITEMS) and rows[0] == {"key": "k0", "reply": "Yes"}


def test_a_verdicts_file_that_is_a_link_is_refused(tmp_path, capsys):
    """The cache's verdicts.jsonl a link to a regular file holding this run's replies: never read through nor
    written through (one line, exit 2, nothing asked, the file unchanged)."""
    run = write_samples_run(tmp_path / "run")
    with judge_server() as server:
        assert judge(run, tmp_path / "a", server.url) == 0  # fills tmp_path/cache
        real = tmp_path / "elsewhere.jsonl"
        os.replace(tmp_path / "cache" / "verdicts.jsonl", real)
        os.symlink(real, tmp_path / "cache" / "verdicts.jsonl")
        before = real.read_bytes()
        done = run_unlearn_here(["judge", run, "--judge", "judge-x", "--backend", "local-completions",
                                 "--base-url", server.url + "/completions", "--cache-dir", tmp_path / "cache",
                                 "--out", tmp_path / "b"], capsys)
        assert len(server.requests) == len(ITEMS)  # only the first run's
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "verdicts.jsonl is a symbolic link; it is never followed" in done.stderr
    assert real.read_bytes() == before and not (tmp_path / "b").exists()


def test_a_cache_that_cannot_be_written_is_refused_before_the_judge_is_asked(tmp_path, capsys):
    """A --cache-dir below a regular file can never hold the replies: refused in one line before any request,
    so that no reply is asked for and then lost (the check runs only when something must be asked)."""
    run = write_samples_run(tmp_path / "run")
    (tmp_path / "file").write_text("not a folder")
    with judge_server() as server:
        done = run_unlearn_here(["judge", run, "--judge", "j", "--backend", "local-completions", "--base-url",
                                 server.url + "/completions", "--cache-dir", tmp_path / "file" / "cache",
                                 "--out", tmp_path / "out"], capsys)
        assert server.requests == []
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "cannot be written" in done.stderr and not (tmp_path / "out").exists()


def test_other_prompt_files_or_versions_ask_the_judge_again(tmp_path):
    """One cache, the same generations and judge: the same prompt files ask nothing; a prompt file whose text
    changed (same name and version) or whose version changed (same text) is asked anew, as is another family."""
    from unlearn_app.judge.cache import VerdictCache
    from unlearn_app.judge.inputs import read_generations
    from unlearn_app.judge.judging import run_pass

    def folder(name: str, edit) -> Path:
        path = tmp_path / name
        path.mkdir()
        for f in FOLDER.glob("yes_no_*.txt"):
            (path / f.name).write_text(edit(f.read_text()))
        return path

    same, reworded = folder("same", lambda t: t), folder("reworded", lambda t: t.replace("Reply with", "Answer with"))
    bumped = folder("bumped", lambda t: t.replace("version: 1\n", "version: 2\n"))
    original = family_prompts("yes-no")["forget"]
    assert family_prompts("yes-no", reworded)["forget"].version == original.version == "1"
    assert family_prompts("yes-no", bumped)["forget"].version == "2"
    assert family_prompts("yes-no", bumped)["forget"].template == original.template
    gens = read_generations(write_samples_run(tmp_path / "run"))
    cache = VerdictCache(tmp_path / "cache")
    asked: list[str] = []

    def asker():
        return lambda texts, _: asked.extend(texts) or ["Yes"] * len(texts)

    counts = []
    for prompts in (family_prompts("yes-no"), family_prompts("yes-no", same), family_prompts("yes-no", reworded),
                    family_prompts("yes-no", bumped), family_prompts("ou-pr133")):
        before = len(asked)
        run_pass(gens, prompts, {"model": "j", "revision": "r"}, False, cache, asker, 0.5)
        counts.append(len(asked) - before)
    assert counts == [len(ITEMS), 0, len(ITEMS), len(ITEMS), len(ITEMS)]


# --------------------------------------------------------------------------- report, ci, leaderboard
def test_report_ci_and_leaderboard_read_the_verdicts(tmp_path, capsys):
    from unlearn_app.leaderboard.submission import build, write
    from unlearn_app.leaderboard.validate import check_folder

    run = write_samples_run(tmp_path / "run")
    out = tmp_path / "judged"
    with judge_server() as server:
        assert judge(run, out, server.url) == 0
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    table = capsys.readouterr().out
    assert f"## {JUDGED}" in table and "| forget_judge_revealed | 0.5" in table

    suite = tmp_path / "suite.yaml"
    suite.write_text(f"tasks: [{JUDGED}]\nchecks:\n  - {JUDGED}/forget_judge_revealed <= 0.25\n"
                     f"  - {JUDGED}/retain_judge_correct >= 0.9\n")
    assert main(["ci", "--suite", str(suite), "--from-results", str(out), "--out", str(tmp_path / "ci")]) == 1
    checks = json.loads((tmp_path / "ci" / "results.json").read_text())["checks"]
    assert [c["passed"] for c in checks] == [False, True]

    built = build([run, out], model_id="org/model", revision="0" * 40, method="ga")  # with the judged answers
    check = check_folder(write(built, tmp_path / "board"))
    finite = {k: v for k, v in EXPECTED.items() if not math.isnan(v)}
    assert check.ok, check.errors
    assert check.recomputed[JUDGED] == pytest.approx(finite) and check.validated

    edited = tmp_path / "edited"
    edited.mkdir()
    for f in out.iterdir():
        text = f.read_text()
        if f.name.startswith("results_"):
            raw = json.loads(text)
            raw["results"][JUDGED]["forget_judge_revealed,none"] = 0.25
            text = json.dumps(raw)
        (edited / f.name).write_text(text)
    check = check_folder(write(build([run, edited], model_id="org/model", revision="0" * 40, method="ga"),
                               tmp_path / "board2"))
    assert check.mismatched == {JUDGED: ["forget_judge_revealed"]} and len(check.errors) == 1


def test_lm_eval_05_names_of_a_task_run_through_its_group(tmp_path):
    """lm-eval 0.5 writes a task of ``--tasks tofu`` as ``samples_tofu::tofu_forget01_<date>.jsonl`` with
    ``tofu::tofu_forget01`` in the results file: the judge reads that folder, its results file or the samples file
    itself as it reads 0.4.13's, and names its task ``judge_tofu_forget01`` as on 0.4.13."""
    from fixtures.lm_eval_05 import as_group_run
    from unlearn_app.judge.inputs import read_generations

    old = write_samples_run(tmp_path / "old", task="tofu_forget01")
    new = as_group_run(old, "tofu", tmp_path / "new")
    (samples_file,) = new.glob("samples_*.jsonl")
    assert samples_file.name == f"samples_tofu::tofu_forget01_{STAMP}.jsonl"
    want = read_generations(old)
    for given in (new, new / f"results_{STAMP}.json", samples_file):
        got = read_generations(given)
        assert got.items == want.items and list(got.items) == ["tofu_forget01"], given
        assert got.files == [samples_file]
    with judge_server() as server:
        assert judge(new, tmp_path / "out", server.url) == 0
        assert len(server.requests) == len(ITEMS)
    assert same(metrics(tmp_path / "out", "judge_tofu_forget01"), EXPECTED)
    assert [r["judge"]["verdict"] for r in samples(tmp_path / "out", "judge_tofu_forget01")] == [
        "yes", "no", "unparsable", "yes", "yes", "no", "yes"]
