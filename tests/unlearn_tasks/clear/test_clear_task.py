"""The CLEAR tasks inside lm-eval on a tiny LLaVA: discovery, requests with images, every metric, the gold reference
round trip, and (slow) the `lm_eval --model hf-multimodal --tasks clear_forget10` command."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("PIL")

from lm_eval.tasks import TaskManager  # noqa: E402

from fixtures.commands import run_command  # noqa: E402
from fixtures.runs import reference_stand_in  # noqa: E402
from harness_ext import tasks_dir  # noqa: E402
from harness_ext.evaluate import run_lm_eval  # noqa: E402
from unlearn_tasks.clear import scoring  # noqa: E402
from unlearn_tasks.clear.documents import SETS  # noqa: E402

TASKS = {"clear", "clear_real_faces", "clear_real_world"} | {
    f"clear_forget{s}{v}" for s in ("01", "05", "10") for v in ("", "_image", "_text")}
METRICS = set(scoring.metric_names(["generation", "likelihood"], list(SETS)))
SMALL = {"max_items_per_split": 2}


def _load(name, **metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return tm.load([name])["tasks"][name]


def test_every_yaml_is_indexed():
    assert TASKS <= set(TaskManager(include_path=str(tasks_dir()), include_defaults=False).all_tasks)


def test_requests_carry_the_image(clear_data_dir):
    task = _load("clear_forget10_image", data_dir=str(clear_data_dir), **SMALL)
    assert task.MULTIMODAL
    task.build_all_requests(limit=6, rank=0, world_size=1)
    by_split = {}
    for inst in task.instances:
        by_split.setdefault(inst.doc["split"], []).append(inst)
    caption = by_split["forget_caption"]
    assert [i.request_type for i in caption] == ["generate_until"] + ["unlearn_answer_logprobs"] * 5
    assert caption[0].args[0].startswith("<image>\nQuestion: ") and caption[0].args[2]["visual"][0].size == (32, 32)
    assert [i.args[1] for i in caption[1:3]] == [" " + caption[0].doc["answer"], " " + caption[0].doc["paraphrased"]]
    facerec = by_split["forget_facerec"]
    assert len(facerec) == 1 + 1 + 3  # generation, the name, three perturbed names
    assert _load("clear_real_world", data_dir=str(clear_data_dir)).metric_names() == [
        "real_world_rougeL_recall", "real_world_prob", "real_world_truth_ratio"]


@pytest.fixture(scope="module")
def first_run(tiny_llava_dir, clear_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("clear_ref")
    res = run_lm_eval(tiny_llava_dir, ["clear_forget10_image"], out, {"data_dir": str(clear_data_dir), **SMALL},
                      backend="hf-multimodal", batch_size=4, gen_kwargs="max_gen_toks=6")
    return out, res


@pytest.mark.slow
def test_every_metric_reported_and_forget_quality_nan_without_reference(first_run):
    _, res = first_run
    values = {k.split(",")[0]: v for k, v in res["results"]["clear_forget10_image"].items()
              if "," in k and "stderr" not in k}
    assert set(values) == METRICS
    assert math.isnan(values["forget_quality"])
    for name in METRICS - {"forget_quality"}:
        assert not math.isnan(values[name]), name
    assert 0 < values["forget_caption_prob"] < 1 and 0 <= values["real_faces_prob"] <= 1


@pytest.mark.slow
def test_a_model_against_its_own_run_has_forget_quality_one(first_run, tiny_llava_dir, clear_data_dir, tmp_path):
    ref_dir, _ = first_run
    (results_file,) = list(ref_dir.rglob("results_*.json"))
    entry = json.loads(results_file.read_text())["configs"]["clear_forget10_image"]["unlearning_reference"]
    assert entry["format"] == scoring.REFERENCE_FORMAT and entry["n_forget"] == 2 and entry["mode"] == "default"
    stand_in = reference_stand_in(ref_dir, "clear_forget10_image", tmp_path / "ref", "gold-model")
    res = run_lm_eval(tiny_llava_dir, ["clear_forget10_image"], tmp_path,
                      {"data_dir": str(clear_data_dir), "reference": str(stand_in.parent), "parts": ["likelihood"],
                       **SMALL}, backend="hf-multimodal", batch_size=4)
    assert res["results"]["clear_forget10_image"]["forget_quality,none"] == pytest.approx(1.0)


def test_a_tofu_run_is_not_taken_as_a_clear_reference(clear_data_dir, tmp_path):
    from unlearn_tasks.reference_logs import ReferenceLogError

    (tmp_path / "results_1.json").write_text(json.dumps({"configs": {"tofu_forget10": {"unlearning_reference": {
        "format": "lm-eval-unlearning/tofu-reference/1", "forget_split": "forget10", "forget_truth_ratio": [0.5]}}}}))
    with pytest.raises(ReferenceLogError, match="no CLEAR results"):
        _load("clear_forget10_image", data_dir=str(clear_data_dir), reference=str(tmp_path), **SMALL)


@pytest.mark.slow
def test_lm_eval_command_runs_clear_forget10_on_hf_multimodal(tiny_llava_dir, clear_data_dir, demo_data_dir, tmp_path):
    """The issue's 'done when': a bare lm_eval on a CLEAR-layout folder reports every metric (image and text part)."""
    metadata = {"data_dir": str(clear_data_dir), "tofu_data_dir": str(demo_data_dir), "max_items_per_split": 2}
    cmd = ["lm_eval", "--model", "hf-multimodal", "--model_args",
           f"pretrained={tiny_llava_dir},dtype=float32", "--device", "cpu", "--batch_size", "4",
           "--tasks", "clear_forget10", "--metadata", json.dumps(metadata), "--gen_kwargs", "max_gen_toks=6",
           "--output_path", str(tmp_path / "out")]
    proc = run_command(cmd, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results_file,) = list((tmp_path / "out").rglob("results_*.json"))
    results = json.loads(results_file.read_text())["results"]
    image = {k.split(",")[0] for k in results["clear_forget10_image"] if "," in k and "stderr" not in k}
    assert image == METRICS
    text = results["clear_forget10_text"]
    assert not math.isnan(text["forget_prob,none"]) and not math.isnan(text["forget_rougeL_recall,none"])


def test_chat_template_prompt_puts_the_image_in_the_user_turn(tiny_llava_dir, clear_data_dir):
    from lm_eval.models.hf_vlms import HFMultimodalLM

    lm = HFMultimodalLM(pretrained=str(tiny_llava_dir), device="cpu", batch_size=1)
    task = _load("clear_forget10_image", data_dir=str(clear_data_dir), **SMALL)
    doc = next(d for d in task.test_docs() if d["split"] == "forget_facerec")
    prompt = task.fewshot_context(doc, 0, apply_chat_template=True, chat_template=lm.apply_chat_template)
    assert prompt == f"USER: <image>\n{doc['question']} ASSISTANT:"
    task.build_all_requests(limit=2, rank=0, world_size=1, apply_chat_template=True, chat_template=lm.apply_chat_template)
    scored = [i for i in task.instances if i.request_type == "unlearn_answer_logprobs"]
    assert scored and all(not i.args[1].startswith(" ") for i in scored)  # no space after the assistant tag
