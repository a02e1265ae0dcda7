"""JUnit XML of the checks (one test case per check), the format GitLab, Jenkins and GitHub test reporters read."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any


def junit_xml(outcomes: list[dict[str, Any]], suite_name: str = "unlearn ci", error: str | None = None) -> str:
    """``outcomes`` are check results (``check``, ``passed``, ``message``); ``error`` adds one errored case."""
    failures = sum(not o["passed"] for o in outcomes)
    root = ET.Element("testsuites", name=suite_name, tests=str(len(outcomes) + bool(error)),
                      failures=str(failures), errors=str(int(bool(error))))
    suite = ET.SubElement(root, "testsuite", name=suite_name, tests=root.get("tests"), failures=str(failures),
                          errors=str(int(bool(error))))
    for o in outcomes:
        first = re.search(r"[A-Za-z_][\w.-]*(?=/[A-Za-z_])", o["check"])  # the first TASK/METRIC's task
        task = first.group(0) if first else "checks"
        case = ET.SubElement(suite, "testcase", classname=f"unlearn.{task}", name=o["check"])
        if not o["passed"]:
            failure = ET.SubElement(case, "failure", message=o["message"], type="CheckFailed")
            failure.text = o["message"]
        else:
            ET.SubElement(case, "system-out").text = o["message"]
    if error:
        case = ET.SubElement(suite, "testcase", classname="unlearn.ci", name="evaluation")
        ET.SubElement(case, "error", message=error, type="EvaluationError").text = error
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | Path, outcomes: list[dict[str, Any]], error: str | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    from unlearn_app.output_guard import write_text

    write_text(path, junit_xml(outcomes, error=error))
    return path
