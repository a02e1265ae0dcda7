"""Watermark owner ids: parsing ranges such as ``"0-19,25"`` and validating single ids."""

from __future__ import annotations

from collections.abc import Iterable

MAX_OWNER_ID = 2**32 - 1


def check_owner_id(value: object) -> int:
    """Return ``value`` as an int owner id in [0, 2**32 - 1], or raise ValueError/TypeError."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"owner id must be an integer, got {value!r}")
    owner = int(value.__index__())  # type: ignore[attr-defined]
    if not 0 <= owner <= MAX_OWNER_ID:
        raise ValueError(f"owner id {owner} is outside [0, {MAX_OWNER_ID}]")
    return owner


def parse_ids(spec: str | int | Iterable[int]) -> list[int]:
    """Parse owner ids: ``"0-19,25"`` -> [0, ..., 19, 25]; ints and iterables of ints pass through.

    Ranges are inclusive. Order of first appearance is kept and duplicates are dropped.
    """
    if isinstance(spec, str):
        items: list[int] = []
        text = spec.strip()
        if not text:
            raise ValueError("empty owner id specification")
        for part in text.split(","):
            part = part.strip()
            if not part:
                raise ValueError(f"empty item in owner id specification {spec!r}")
            lo_text, sep, hi_text = part.partition("-")
            try:
                lo = int(lo_text.strip())
                hi = int(hi_text.strip()) if sep else lo
            except ValueError:
                raise ValueError(f"bad owner id item {part!r} in {spec!r} (use e.g. '0-19,25')") from None
            if hi < lo:
                raise ValueError(f"descending range {part!r} in {spec!r}")
            check_owner_id(lo)
            check_owner_id(hi)
            if hi - lo >= 1_000_000:
                raise ValueError(f"range {part!r} is too large (at most 1,000,000 ids)")
            items.extend(range(lo, hi + 1))
    elif isinstance(spec, (int,)) and not isinstance(spec, bool):
        items = [spec]
    else:
        items = [check_owner_id(v) for v in spec]
        if not items:
            raise ValueError("no owner ids given")
    return list(dict.fromkeys(check_owner_id(v) for v in items))


def format_ids(ids: Iterable[int]) -> str:
    """Inverse of :func:`parse_ids` for sorted runs: [0, 1, 2, 5] -> ``"0-2,5"``."""
    values = [check_owner_id(v) for v in ids]
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)
