"""The CLEAR loader (Hub layout: parquet with image bytes, JSON lines with image files or bytes) and the documents."""

from __future__ import annotations

import base64
import io
import json

import pytest

pytest.importorskip("PIL")

from unlearn_methods.scaffolding.clear_corpus import person_look, person_name, write_clear_layout  # noqa: E402
from unlearn_methods.scaffolding.faces import draw_face  # noqa: E402
from unlearn_tasks.clear import documents as clear_docs  # noqa: E402
from unlearn_tasks.clear.data import load_clear  # noqa: E402
from unlearn_tasks.dataset_loader import DataError  # noqa: E402


def _pixels(img):
    return img.convert("RGB").tobytes()


def test_parquet_layout_with_image_bytes(clear_data_dir):
    rows = load_clear("forget10_perturbed", data_dir=clear_data_dir)
    assert len(rows) == 2 * 2  # two forget people (10% of 20), two poses each
    first = rows[0]
    assert first["name"] == person_name(18)
    assert person_look(18)["hair"] in first["caption"]
    assert len(first["perturbed_captions"]) == 3 and first["paraphrased_caption"]
    assert first["image"].size == (32, 32)
    assert _pixels(first["image"]) == _pixels(draw_face(18, 0))
    mixed = load_clear("forget10+tofu", data_dir=clear_data_dir)
    assert any(r["image"] is None and r["question"] for r in mixed) and any(r["image"] is not None for r in mixed)


def test_jsonl_layout_with_image_files_and_the_environment_variable(tmp_path, monkeypatch):
    root = tmp_path / "therem" / "CLEAR"
    write_clear_layout(root, n_people=10, poses=1, n_celebrities=2, fmt="jsonl")
    monkeypatch.setenv("UNLEARN_DATA_DIR", str(tmp_path))
    faces = load_clear("real_faces")
    assert len(faces) == 2 and _pixels(faces[0]["image"]) == _pixels(draw_face(10, 0))
    assert faces[0]["answer"] in faces[0]["options"]


def test_jsonl_with_base64_bytes_and_clear_errors(tmp_path):
    buf = io.BytesIO()
    draw_face(3).save(buf, format="PNG")
    folder = tmp_path / "real_faces"
    folder.mkdir()
    record = {"image": {"bytes": base64.b64encode(buf.getvalue()).decode(), "path": None}, "answer": "A", "options": ["A", "B"]}
    (folder / "train.jsonl").write_text(json.dumps(record) + "\n")
    rows = load_clear("real_faces", data_dir=tmp_path)
    assert _pixels(rows[0]["image"]) == _pixels(draw_face(3))
    (folder / "train.jsonl").write_text(json.dumps({"image": "missing.png", "answer": "A", "options": ["A"]}) + "\n")
    with pytest.raises(DataError, match="missing.png"):
        load_clear("real_faces", data_dir=tmp_path)
    (folder / "train.jsonl").write_text(json.dumps({"answer": "A", "options": ["A"]}) + "\n")
    with pytest.raises(DataError, match="image"):
        load_clear("real_faces", data_dir=tmp_path)
    with pytest.raises(DataError, match="real_world"):
        load_clear("real_world", data_dir=tmp_path)


def test_documents_interleave_sets_draw_questions_seeded_and_follow_the_mode(clear_data_dir, monkeypatch):
    docs = clear_docs.build_docs("forget10", data_dir=clear_data_dir)
    assert [d["split"] for d in docs[:6]] == list(clear_docs.SETS)
    again = clear_docs.build_docs("forget10", data_dir=clear_data_dir)
    assert [d["question"] for d in docs] == [d["question"] for d in again]
    captions = [d for d in docs if d["split"] == "retain_caption"]
    assert all(d["question"] in clear_docs.CAPTION_QUESTIONS for d in captions)
    assert len({d["question"] for d in captions}) > 1
    facerec = next(d for d in docs if d["split"] == "forget_facerec")
    assert facerec["question"] == clear_docs.FACE_QUESTION and facerec["paraphrased"] == facerec["answer"]
    real = next(d for d in docs if d["split"] == "real_faces")
    assert real["answer"] not in real["perturbed"] and len(real["perturbed"]) == 3
    monkeypatch.setattr(clear_docs, "RELEASE_CAP", 3)
    parity = clear_docs.build_docs("forget10", data_dir=clear_data_dir, parity=True)
    counts = {s: sum(d["split"] == s for d in parity) for s in clear_docs.SETS}
    assert max(counts.values()) == 3
    real = next(d for d in parity if d["split"] == "real_faces")
    assert real["answer"] in real["perturbed"] and len(real["perturbed"]) == 4
    assert clear_docs.image_prompt("Who?") == "<image>\nQuestion: Who?\nAnswer:"


def test_corrupt_image_and_empty_parquet_name_the_file(clear_data_dir, tmp_path):
    """Issue 29: PIL's UnidentifiedImageError and datasets' DatasetGenerationError become one line naming the file."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = shutil.copytree(clear_data_dir, tmp_path / "clear")
    shard = folder / "forget10_perturbed" / "train-00000-of-00001.parquet"
    table = pq.read_table(shard)
    images = table.column("image").to_pylist()
    images[1] = {"bytes": b"not an image at all", "path": None}
    pq.write_table(table.set_column(table.schema.get_field_index("image"), "image",
                                    pa.array(images, table.schema.field("image").type)), shard)
    with pytest.raises(DataError) as e:
        load_clear("forget10_perturbed", data_dir=folder)
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"{shard} record 1: its image bytes (19 bytes) is not a "
                                                      "readable image (UnidentifiedImageError")
    pq.write_table(table.slice(0, 0), shard)  # the schema, no rows
    with pytest.raises(DataError, match=rf"^{shard} holds no records \(0 rows\)\.$"):
        load_clear("forget10_perturbed", data_dir=folder)
    shard.write_bytes(b"garbage")
    with pytest.raises(DataError, match=rf"^{shard} is not a readable parquet file"):
        load_clear("forget10_perturbed", data_dir=folder)
