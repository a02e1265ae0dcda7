"""Synthetic "faces" drawn with PIL: one look per person (face shape, skin, hair and eye colours), several poses.

Used by the CLEAR-layout fixture (:mod:`unlearn_methods.scaffolding.clear_corpus`), the tests and the demo; nothing here
comes from the CLEAR release.
"""

from __future__ import annotations

import random

SKIN = [(241, 194, 125), (224, 172, 105), (198, 134, 66), (141, 85, 36), (255, 219, 172), (170, 110, 70)]
HAIR = [(20, 20, 20), (110, 60, 20), (230, 200, 80), (200, 60, 30), (150, 150, 150), (60, 30, 90)]
EYES = [(30, 90, 200), (40, 140, 60), (90, 60, 30), (20, 20, 20)]
BACKGROUNDS = [(230, 240, 255), (255, 245, 220), (220, 255, 230), (245, 225, 245), (235, 235, 235)]


def draw_face(person: int, pose: int = 0, size: int = 32):
    """The image of ``person`` in ``pose``: the person's look is fixed by ``person``; the pose shifts the face a
    little and changes the background, so two images of one person differ but look alike."""
    from PIL import Image, ImageDraw

    look = random.Random(person * 7919 + 17)
    skin, hair, eyes = look.choice(SKIN), look.choice(HAIR), look.choice(EYES)
    round_face = look.random() < 0.5
    mouth_wide = look.random() < 0.5
    pose_rng = random.Random(person * 104729 + pose * 31 + 5)
    img = Image.new("RGB", (size, size), BACKGROUNDS[pose % len(BACKGROUNDS)])
    d = ImageDraw.Draw(img)
    s = size / 32
    dx, dy = pose_rng.randint(-2, 2) * s, pose_rng.randint(-1, 1) * s
    box = [6 * s + dx, 6 * s + dy, 26 * s + dx, 29 * s + dy]
    d.rectangle([box[0] - 1 * s, box[1] - 3 * s, box[2] + 1 * s, box[1] + 6 * s], fill=hair)
    (d.ellipse if round_face else d.rectangle)(box, fill=skin)
    for ex in (11, 19):
        d.ellipse([ex * s + dx, 14 * s + dy, (ex + 3) * s + dx, 17 * s + dy], fill=eyes)
    half = 6 if mouth_wide else 3
    d.line([(16 - half) * s + dx, 23 * s + dy, (16 + half) * s + dx, 23 * s + dy], fill=(150, 40, 40), width=max(1, int(s)))
    return img
