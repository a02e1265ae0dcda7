"""The HTML pages come from the jinja2 templates in unlearn_app/templates/ with autoescaping on: every template is
rendered with hostile strings in every field (the contexts the real builders pass, each string replaced) and has the
same elements and attributes as with harmless text; no template marks anything safe; links from data are relative
paths; a site built from a hostile submission shows it as text, also in Chromium."""

import hashlib
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from unlearn_app import pages
from unlearn_app.leaderboard.importers import Row
from unlearn_app.leaderboard.site import build_site
from unlearn_app.leaderboard.validate import Check
from unlearn_app.reports.evaluated_run import Run
from unlearn_app.reports.html_page import render_html
from unlearn_app.sweep.leaderboard import _html_sections

TEMPLATES = Path(pages.__file__).parent / "templates"
#: A value that would run script, open an element or break out of an attribute, a <style> or a <script>, were it
#: not escaped; it starts with a javascript: URL, for the fields that become links.
HOSTILE = ("javascript:alert(1)//<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">"
           "\"onmouseover=\"window.__pwned=3' onfocus='window.__pwned=4</style></script><i data-pwn=1>&amp; "
           "é中文🙂\u202e")
#: Every page template and fragment; base.html (the layout) and macros.html are rendered through them.
RENDERED = {"leaderboard_index.html", "leaderboard_submission.html", "report.html", "sweep_board.html"}
#: Values the builders make, not the data: PNG data URIs (the report's figures, a sweep's picture). The `png` filter
#: lets nothing else through (test_embedded_images_are_png_data_uris_only).
BUILDER_MADE = {"uri", "picture_uri"}
PNG = pages.PNG_URI + "iVBORw0KGgo="
TASK = "tofu_forget01"


def _check(root: Path, text: str = "x", task: str = TASK) -> Check:
    """A submission that failed validation (one mismatch, one unverified number), every string field ``text``."""
    folder = root / "submissions" / "npo-npo-0123456789ab"
    folder.mkdir(parents=True)
    (folder / "submission.json").write_text("{}")
    (folder / "items").mkdir()
    (folder / "items" / "TOFU_EVAL.json").write_text("{}")
    record = {"id": folder.name,
              "model": {"name": text, "family": text, "hub_id": text, "revision": text, "local_sha256": text},
              "method": {"name": text, "hyperparameters": {text: text}}, "reference": {"source": text, "sha256": text},
              "date": text, "submitter": {"name": text, "notes": text}, "packages": {text: text},
              "files": {"items/TOFU_EVAL.json": hashlib.sha256(b"{}").hexdigest()},
              "results": {task: {"run": text, "kind": text, "version": text,
                                 "aggregates": {"forget_quality": 0.5, "model_utility": 0.4, "privleak": 3.0}}}}
    return Check(folder.name, str(folder), errors=[text], record=record,
                 recomputed={task: {"forget_quality": 0.5, "model_utility": 0.41}},
                 unverified={task: ["privleak"]}, mismatched={task: ["model_utility"]})


def _runs() -> list[Run]:
    prov = {"package": "lm-eval-unlearning", "version": "0.1", "git_commit": "abc",
            "data": [{"source": "s", "config": "c", "sha256": "a" * 64}], "metric_modes": {}, "reference": None}
    checks = [{"check": "tofu_forget10/forget_quality >= 0.05", "passed": True, "value": 0.3, "bound": 0.05},
              {"check": "tofu_forget10/model_utility >= 0.9", "passed": False, "value": 0.81, "bound": 0.9}]
    return [Run("target", "/runs/target", {"tofu_forget10": {"forget_quality": 1e-4, "model_utility": 0.92}},
                {"tofu_forget10": prov}, checks, "/runs/target/results.json", ["a note"]),
            Run("npo", "/runs/npo", {"tofu_forget10": {"forget_quality": 0.31, "model_utility": 0.81}},
                {"tofu_forget10": {**prov, "data": [{"source": "s", "config": "c", "sha256": "b" * 64}]}}),
            Run("old", "/runs/old", {"tofu_forget10": {"forget_quality": 0.2, "model_utility": 0.5}})]


def _board() -> dict:
    spread = {"mean": 0.4, "sd": 0.1, "n": 2}
    return {"pareto": ["tofu_forget10/model_utility"], "attacks": [], "select": "tofu_forget10/model_utility:max",
            "leaderboard": [{"method": "npo", "values": {"beta": 0.1}, "seeds": [0, 1], "score": spread,
                             "tofu_forget10/model_utility": spread, "checks_passed": True}],
            "trials": [{"id": "t0", "method": "npo", "values": {"beta": 0.1}, "seed": 0, "status": "ok", "error": None,
                        "stopped": None, "results_file": "t0/results.json", "wall_s": 1.5}]}


@pytest.fixture(scope="module")
def contexts(tmp_path_factory) -> dict[str, dict]:
    """What the real builders pass to each template (the first call per template)."""
    root = tmp_path_factory.mktemp("pages")
    seen: dict[str, dict] = {}
    original = pages.render

    def record(name, **context):
        seen.setdefault(name, context)
        return original(name, **context)

    imported = [Row(TASK, "llama2-7b", "llama2-7b", "GA", {"forget_quality": 0.01, "model_utility": 0.5},
                    "unverifiable", "TOFU leaderboard CSV")]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pages, "render", record)
        build_site([_check(root)], imported, root / "site")
        render_html(_runs(), sections=_html_sections(_board(), PNG))
    return seen


def _poison(value, text: str, keep: set[str] = BUILDER_MADE):
    """``value`` with every string in it replaced by ``text``, but for the values of the keys ``keep``."""
    if isinstance(value, str):
        return text
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, dict):
        return {k: v if k in keep else _poison(v, text, keep) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_poison(v, text, keep) for v in value)
    raise TypeError(f"a template context holds a {type(value).__name__}: teach _poison about it")


class _Page(HTMLParser):
    """The page's elements with their attribute names, every attribute, the text and the scripts' contents."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements, self.attrs, self.text, self.scripts, self._in_script = [], [], [], [], False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, tuple(sorted(name for name, _ in attrs))))
        self.attrs += [(tag, name, value or "") for name, value in attrs]
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self.elements.append(("/" + tag, ()))
        self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def test_every_template_is_rendered_by_this_test(contexts):
    made = {p.name for p in TEMPLATES.glob("*.html")} - {"base.html", "macros.html"}
    assert made == RENDERED == set(contexts)


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_hostile_strings_in_every_field_are_escaped(contexts, name):
    harmless = pages.render(name, **_poison(contexts[name], "x"))
    hostile = pages.render(name, **_poison(contexts[name], HOSTILE))
    plain, page = _Page(harmless), _Page(hostile)
    assert page.elements == plain.elements  # no element and no attribute came from the data
    assert page.scripts == plain.scripts  # the page's own script only, the same whatever the data
    assert hostile.lower().count("<script") == harmless.lower().count("<script") == (name == "leaderboard_index.html")
    assert "</style></script>" not in hostile and "<i data-pwn" not in hostile
    assert sum(t.count(HOSTILE) for t in page.text) >= 3  # shown as text, not dropped
    for tag, attr, value in page.attrs:
        assert not attr.startswith("on"), (tag, attr)
        if attr in ("href", "src"):
            assert value.startswith(pages.PNG_URI) or not re.match(r"\s*([a-z][a-z0-9+.-]*:|//)", value, re.I), value
    if name in ("report.html", "sweep_board.html"):  # a builder-made image that is no PNG data URI is refused
        with pytest.raises(ValueError, match="base64 PNG data URI"):
            pages.render(name, **_poison(contexts[name], HOSTILE, keep=set()))


def test_no_template_marks_anything_safe():
    """Autoescaping is on, and nothing turns it off: no ``|safe``, no ``autoescape false``, no Markup in a template;
    in the code, Markup is made in one place only, pages.fragment (a part rendered by an autoescaped template)."""
    assert pages.environment().autoescape is True
    for path in TEMPLATES.iterdir():
        text = path.read_text()
        assert not re.search(r"\|\s*safe\b|autoescape\s+false|markup", text, re.I), path.name
    root = Path(pages.__file__).parent
    makers = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if re.search(r"\bMarkup\(", p.read_text()))
    assert makers == ["pages.py"]


def test_a_plain_string_given_as_a_section_is_text():
    page = render_html(_runs()[:1], sections=["<script>window.__pwned=1</script>", pages.fragment("sweep_board.html",
                       **_poison({"select": "s", "head": ["h"], "rows": [["c"]], "picture_uri": None,
                                  "trial_head": ["t"], "trial_rows": [["r"]]}, "<b>x</b>"))])
    assert "<script>window" not in page and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert '<h2 id="leaderboard">Leaderboard</h2>' in page and "<b>" not in page


def test_links_from_data_are_relative_paths():
    href = pages.relative_href
    assert href("submissions/npo-npo-0123456789ab.html") == "submissions/npo-npo-0123456789ab.html"
    assert href("javascript:alert(1)") == "javascript%3Aalert%281%29"  # a file of that name, not a script
    assert href("JavaScript:x") == "JavaScript%3Ax" and href("data:text/html,x") == "data%3Atext/html%2Cx"
    assert href("//evil.example/x") == "./evil.example/x" and href("/etc/passwd") == "./etc/passwd"
    assert href('a b/c#d?e"f<g>.json') == "a%20b/c%23d%3Fe%22f%3Cg%3E.json"
    assert href("é") == "%C3%A9"


def test_embedded_images_are_png_data_uris_only():
    assert pages.embedded_png(PNG) == PNG
    for bad in ("javascript:alert(1)", "data:text/html;base64,PHNjcmlwdD4=", PNG + '"onerror="x', "x" + PNG):
        with pytest.raises(ValueError, match="base64 PNG data URI"):
            pages.embedded_png(bad)


def test_one_layout_and_one_stylesheet_for_every_page(contexts):
    assert [p.name for p in TEMPLATES.glob("*.css")] == ["style.css"]
    style = (TEMPLATES / "style.css").read_text()
    for name in RENDERED - {"sweep_board.html"}:  # the sweep's section is a part of the report
        assert (TEMPLATES / name).read_text().count('{% extends "base.html" %}') == 1, name
        page = pages.render(name, **contexts[name])
        assert page.startswith("<!DOCTYPE html>") and page.count("<style>") == 1, name
        assert page.split("<style>")[1].split("</style>")[0].strip() == style.strip(), name


def test_a_site_built_from_a_hostile_submission_shows_it_as_text(tmp_path):
    """Every string of the submission, its task and metric names, its problems and a file name are hostile (the
    folder, hence the id, too); the index and the submission's page show them as text, every link resolves to the
    file it names, and in Chromium no script of the data runs while the filters still select the row."""
    bare = HOSTILE.replace("/", "|")  # a file or folder name
    check = _check(tmp_path / "board", HOSTILE, task=HOSTILE)
    folder = Path(check.folder).with_name(bare)
    shutil.move(check.folder, folder)
    (folder / f"{bare}.json").write_text("{}")
    check.id, check.folder = bare, str(folder)
    check.record["results"][HOSTILE]["aggregates"][HOSTILE] = 0.25
    site = tmp_path / "site"
    index = build_site([check], [Row(HOSTILE, HOSTILE, "llama2-7b", HOSTILE, {HOSTILE: 1.0}, HOSTILE, HOSTILE)], site)
    pages_ = {index: 1, site / "submissions" / f"{bare}.html": 0}
    for path, scripts in pages_.items():
        text = path.read_text()
        page = _Page(text)
        assert text.lower().count("<script") == scripts and "<i data-pwn" not in text
        assert not [a for a in page.attrs if a[1].startswith("on") or a[1] == "data-pwn"]
        for _, attr, value in page.attrs:
            if attr in ("href", "src"):
                assert not re.match(r"[a-z][a-z0-9+.-]*:|//", value, re.I), value
                assert (path.parent / unquote(value)).is_file(), (path.name, value)
        assert sum(HOSTILE in t for t in page.text) >= (2 if scripts else 8)
    from test_html_report import browser

    probe = site / "probe.html"
    probe.write_text(index.read_text().replace("</body>", """<script>
const sel = document.getElementById('family');
sel.value = sel.options[1].value; sel.dispatchEvent(new Event('change'));
const shown = Array.from(document.querySelectorAll('tr[data-family]')).filter(r => !r.hidden).length;
document.body.setAttribute('data-probe', [String(window.__pwned), document.querySelectorAll('[data-pwn]').length,
  sel.options.length, shown].join(','));
</script></body>"""))
    proc = browser("--dump-dom", probe.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r'data-probe="([^"]*)"', proc.stdout).group(1) == "undefined,0,3,1"


def test_a_status_gives_its_first_word_as_its_class():
    from unlearn_app.leaderboard.site import status_class

    assert [status_class(s) for s in ("validated", "failed", "unverifiable", "partly verified (3 of 19)",
                                      '"onmouseover=x', "Validated", "")] == [
        "validated", "failed", "unverifiable", "partly", "", "", ""]
