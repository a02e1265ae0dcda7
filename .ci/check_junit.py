"""Fail a CI stage that passed without testing: read a pytest JUnit XML report and exit 1 (saying why) when fewer
than --min-tests tests ran, or when any test was skipped (unless --allow-skips), failed or errored.

    python .ci/check_junit.py REPORT.xml --min-tests N [--allow-skips]
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET


def counts(path: str) -> dict[str, int]:
    """Totals over the report's test suites: tests, skipped, failures, errors."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "skipped", "failures", "errors")}


def problems(c: dict[str, int], min_tests: int, allow_skips: bool = False) -> list[str]:
    out = []
    ran = c["tests"] - c["skipped"] if allow_skips else c["tests"]
    if ran < min_tests:
        out.append(f"only {ran} tests ran, expected at least {min_tests}")
    out += [f"{c[k]} {k}" for k in ("skipped", "failures", "errors") if c[k] and not (allow_skips and k == "skipped")]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--min-tests", type=int, required=True)
    parser.add_argument("--allow-skips", action="store_true", help="skipped tests do not fail the stage (nor count)")
    args = parser.parse_args(argv)
    try:
        c = counts(args.report)
    except (OSError, ET.ParseError) as err:
        print(f"CI stage FAILED: no readable test report ({err}): pytest stopped before running tests", file=sys.stderr)
        return 1
    bad = problems(c, args.min_tests, args.allow_skips)
    if bad:
        print(f"CI stage FAILED: {'; '.join(bad)} ({args.report})", file=sys.stderr)
        return 1
    skipped = f"{c['skipped']} skipped" if c["skipped"] else "none skipped"
    print(f"CI stage: {c['tests'] - c['skipped']} tests ran and passed, {skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
