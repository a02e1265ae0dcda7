"""Print a pip constraints file that pins every dependency of pyproject.toml to its floor (its ``>=`` bound), so the
floor stage (.ci/floor_stage.sh) installs the oldest versions the package claims to support. The floors are declared
once, in pyproject.toml; a dependency without a ``>=`` bound is an error (nothing to test at).

    python .ci/floor_constraints.py > floor-constraints.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
_FLOOR = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")


def floor(requirement: str) -> tuple[str, str]:
    """``(name, lowest version)`` of a requirement such as ``"lm-eval>=0.4.13,<0.5"``."""
    match = _FLOOR.match(requirement)
    if not match:
        raise ValueError(f"cannot read the requirement {requirement!r}")
    name, spec = match.groups()
    lows = [s.strip()[2:].strip() for s in spec.split(",") if s.strip().startswith(">=")]
    if len(lows) != 1:
        raise ValueError(f"{requirement!r} has no single '>=' floor: give it one in pyproject.toml")
    return name, lows[0]


def constraints(pyproject: Path = PYPROJECT) -> list[str]:
    """One ``name==floor`` line per dependency of ``[project].dependencies``, in declaration order."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return ["{}=={}".format(*floor(d)) for d in deps]


def main() -> int:
    print(f"# Generated from {PYPROJECT.name} by .ci/floor_constraints.py: every dependency at its floor.")
    print("\n".join(constraints()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
