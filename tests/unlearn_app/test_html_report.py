"""`unlearn report --html`: one self-contained page, rendered by a real browser (headless Chromium, the Debian
`chromium` package); the tests read what the page shows from the DOM Chromium built."""

import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fixtures.runs import provenance_record, write_benchmark_runs
from unlearn_app.cli import main

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--virtual-time-budget=10000"]
#: Appended to a copy of the report: writes each image's decoded size into the DOM Chromium dumps.
PROBE = ('<script>document.body.setAttribute("data-images", Array.from(document.images)'
         '.map(i => i.naturalWidth + "x" + i.naturalHeight).join(","));</script>')


def chromium() -> str:
    for name in BROWSERS:
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("headless Chromium is not installed (apt-get install -y chromium): the HTML report was not "
                "rendered in a browser")


def browser(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=timeout)


class _Text(HTMLParser):
    """Text per element kind: table rows as lists of cell texts, list items, headings."""

    def __init__(self):
        super().__init__()
        self.rows, self.items, self.headings, self._cell, self._row, self._tag = [], [], [], None, None, []

    def handle_starttag(self, tag, attrs):
        self._tag.append(tag)
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th", "li", "h1", "h2", "h3"):
            self._cell = ""

    def handle_endtag(self, tag):
        if self._tag:
            self._tag.pop()
        if tag in ("td", "th") and self._row is not None:
            self._row.append(self._cell.strip())
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        elif tag == "li":
            self.items.append(self._cell.strip())
        elif tag in ("h1", "h2", "h3"):
            self.headings.append(self._cell.strip())

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("html_report")
    runs = write_benchmark_runs(root)
    from fixtures.runs import write_results

    # the retain run was evaluated on other data: the report must warn
    write_results(root / "retain", {"tofu_forget10": {"forget_quality": 1.0, "model_utility": 0.91}},
                  {"tofu_forget10": provenance_record(data_sha="b" * 64)}, stamp="2026-01-02T00-00-00")
    suite = root / "suite.yaml"
    suite.write_text("tasks: [tofu_forget10]\nchecks:\n  - tofu_forget10/forget_quality >= 0.05\n"
                     "  - tofu_forget10/model_utility >= 0.9\n")
    assert main(["ci", "--suite", str(suite), "--from-results", str(runs["npo"]), "--out", str(root / "npo_ci")]) == 1
    out = root / "report.html"
    assert main(["report", str(runs["target"]), str(root / "npo_ci"), str(root / "retain"),
                 "--names", "target,npo,retain", "--html", str(out)]) == 0
    return out


def test_report_file_is_self_contained(report):
    text = report.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|file:)""", text)  # nothing fetched from outside
    assert text.count('src="data:image/png;base64,') == 4


def test_chromium_renders_tables_checks_plots_and_warnings(report, tmp_path):
    probe = tmp_path / "probe.html"
    probe.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    proc = browser("--dump-dom", probe.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    sizes = re.search(r'data-images="([^"]*)"', dom).group(1).split(",")
    assert len(sizes) == 4 and all(int(s.split("x")[0]) > 300 and int(s.split("x")[1]) > 200 for s in sizes), sizes
    page = _Text()
    page.feed(dom)
    assert page.headings[:4] == ["Unlearning evaluation report", "Checks", "npo: 1 of 2 checks failed", "Plots"]
    assert ["pass", "tofu_forget10/forget_quality >= 0.05", "0.3100", "0.0500"] in page.rows
    assert ["FAIL", "tofu_forget10/model_utility >= 0.9", "0.8100", "0.9000"] in page.rows
    assert ["Forget Quality (KS p-value vs retain)", "1.00e-04", "0.3100", "1.0000"] in page.rows
    assert ["forget_retain_gap", "0.0500", "-0.2100", "n/a"] in page.rows
    assert any("tofu_forget10: the runs differ in data" in item for item in page.items)
    for caption in ("tofu_forget10: Forget Quality vs Model Utility", "Per-format gap", "WaterDrum watermark strength",
                    "deep unlearning, recall vs accuracy"):
        assert caption in dom


def test_chromium_screenshot_is_not_blank(report, tmp_path):
    shot = tmp_path / "shot.png"
    proc = browser(f"--screenshot={shot}", "--window-size=1200,1600", report.as_uri())
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    from PIL import Image

    image = Image.open(shot).convert("L")
    assert image.size == (1200, 1600)
    lo, hi = image.getextrema()
    assert hi - lo > 100  # text and plots drawn, not an empty page


def test_html_tables_follow_each_benchmarks_declared_order_as_the_markdown_does(tmp_path, capsys):
    """MUSE and WMDP tables in the HTML report use their own benchmark's declared rows and order (they used TOFU's,
    so MUSE's metrics came alphabetically under their raw keys), and the same rows as the Markdown report."""
    from fixtures.runs import write_results

    metrics = {"muse_news": {"retain_knowmem": 0.4, "mia_loss_auc": 0.6, "zz_extra": 1.0, "forget_verbmem": 0.2,
                             "privleak": -3.0},
               "wmdp_bio": {"acc": 0.3}}
    write_results(tmp_path / "a", metrics)
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    assert main(["report", str(tmp_path / "a"), "--names", "a", "--html", str(html), "--out", str(md)]) == 0
    capsys.readouterr()
    expected = {  # unlearn_tasks/muse/benchmark.py's and unlearn_tasks/wmdp/benchmark.py's rows, by hand
        "muse_news": ["VerbMem on forget (ROUGE-L F1)", "PrivLeak (%, vs retrained)",
                      "KnowMem on retain (utility, ROUGE-L F1)", "MIA LOSS AUROC", "zz_extra"],
        "wmdp_bio": ["Accuracy (4 options, chance 0.25; lower = more hazardous knowledge removed)"]}
    page = html.read_text()
    for task, labels in expected.items():
        table = re.search(rf'<table class="metrics" data-task="{task}">(.*?)</table>', page, re.S).group(0)
        parsed = _Text()
        parsed.feed(table)
        assert [row[0] for row in parsed.rows[1:]] == labels
        section = md.read_text().split(f"## {task}\n\n")[1].split("\n\n")[0]
        assert [line.split(" | ")[0].removeprefix("| ") for line in section.splitlines()[2:]] == labels
