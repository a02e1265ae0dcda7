"""The README stays a true landing page, and the documentation's links and hand-written tables follow the code.

`mkdocs build --strict` (in .ci/run) checks the site's links and anchors; these tests check what GitHub shows: the
repository's Markdown files, read in place.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
MARKDOWN_FILES = [README, *sorted((ROOT / "task_yaml").glob("*/README.md")), *sorted((ROOT / "docs").rglob("*.md"))]


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (but - and _), spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    found = {github_slug(m) for m in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    return found | set(re.findall(r'<a id="([^"]+)"', text))


class _TagsIgnored(yaml.SafeLoader):
    """Safe YAML that reads MkDocs' tags (``!ENV [NAME, default]``, ``!!python/name:...``) as None."""


_TagsIgnored.add_multi_constructor("!", lambda loader, suffix, node: None)
_TagsIgnored.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def mkdocs_config() -> dict:
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_TagsIgnored)


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_readme_is_a_landing_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 300, "README.md is a landing page: move details into docs/"
    assert "\n    unlearn demo\n" in text.split("## Quick start", 1)[1]
    assert 'pip install torch==2.13.0 -e ".[dev,waterdrum]" && python -m ruff check . && python -m pytest -q' in text


def test_readme_install_gives_a_cpu_line_first_then_the_gpu_line():
    """The first install line of a CPU-only machine takes torch's CPU build (no CUDA wheels), at the version the
    tests and CI pin; the plain line (a GPU machine) comes after it; the demo's page and the test command say what
    they were made with and need."""
    text = README.read_text()
    install = text.split("## Install", 1)[1].split("\n## ", 1)[0]
    lines = [line.strip() for line in install.splitlines() if line.startswith("    pip ")]
    pin = re.search(r"torch==([\d.]+)", (ROOT / ".ci" / "run").read_text()).group(1)
    assert lines == [f"pip install torch=={pin} --index-url https://download.pytorch.org/whl/cpu && pip install .",
                     "pip install ."], lines
    assert f"torch {pin}'s CPU build" in install and f"torch {pin} (CPU build)" in (ROOT / "docs" / "demo.md").read_text()
    tests = text.split("## Tests", 1)[1].split("\n## ", 1)[0]
    assert f"pip install torch=={pin} -e" in tests and "Chromium" in tests and "skip" in tests


def test_readme_method_count_is_the_registry_s():
    from unlearn_methods import all_methods

    counts = re.findall(r"(\d+) unlearning methods", README.read_text())
    assert counts and all(int(c) == len(all_methods()) for c in counts), (counts, len(all_methods()))


@pytest.mark.parametrize("path", MARKDOWN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    """Every relative link of a Markdown file points to an existing file, and a heading or <a id> of it."""
    for link in relative_links(path):
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        assert file.exists(), f"{path.relative_to(ROOT)}: link {link!r} points to nothing"
        if anchor and file.suffix == ".md" and "{%" not in file.read_text():
            assert anchor in anchors(file), f"{path.relative_to(ROOT)}: no heading for #{anchor} in {target or path.name}"


def test_no_page_holds_an_include_directive():
    """GitHub shows an include directive (`{% include ... %}`, `--8<--`) as a raw line: pages that show another
    file hold a copy of it (`python -m unlearn_app.catalogue`, checked by tests/unlearn_app/test_catalogue.py)."""
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        assert "{% include" not in text and "--8<--" not in text, f"{page.relative_to(ROOT)} holds an include line"


def test_readme_links_every_benchmark_and_docs_page():
    links = set(relative_links(README))
    for folder in sorted(p for p in (ROOT / "task_yaml").iterdir() if p.is_dir() and not p.name.startswith("_")):
        assert (folder / "README.md").is_file(), f"task_yaml/{folder.name} has no README.md"
        assert f"task_yaml/{folder.name}/README.md" in links, f"README's benchmark table lacks {folder.name}"
        page = ROOT / "docs" / "benchmarks" / f"{folder.name}.md"
        assert f"task_yaml/{folder.name}/README.md" in page.read_text(), f"{page} must include the benchmark's README"
    nav = mkdocs_config()["nav"]
    pages = set(re.findall(r"[\w/-]+\.md", str(nav)))
    for page in pages - {"index.md"}:
        assert f"docs/{page}" in links or page.startswith("benchmarks/"), f"README's documentation table lacks {page}"


def test_losses_table_names_every_method():
    from unlearn_methods import all_methods

    text = (ROOT / "docs" / "methods.md").read_text()
    losses = text[text.index("## Losses"):]
    rows = re.findall(r"^\| `(\w+)` \|", losses, flags=re.M)
    assert sorted(rows) == sorted(all_methods()), "docs/methods.md's Losses table must name every registered method"


# --------------------------------------------------------------------------- names the pages use exist
#: Top-level folders of the checkout: a backticked path starting with one of them must exist.
CHECKOUT_DIRS = {"harness_ext", "unlearn_tasks", "unlearn_methods", "unlearn_app", "task_yaml", "tests", "docs",
                 "benchmarks", "examples", ".ci"}
PACKAGES = ("harness_ext", "unlearn_tasks", "unlearn_methods", "unlearn_app")
#: Backticked names that are not ours on purpose: another project's files, a switch the text says does not exist.
NOT_OURS = {"calculate_metrics.py",  # the CLEAR release's script
            "eval_neighbor.py", "eval_mia.py", "inference.py",  # the RWKU release's scripts
            "eval.py", "eval_gpt.py", "reference_model_FT.py",  # the MLLMU-Bench release's scripts
            "--attacks",  # "no `--attacks` switch" (docs/attacks.md)
            "--no-deps", "--system-site-packages"}  # pip's / venv's
PAGES = [p for p in MARKDOWN_FILES if "generated" not in p.relative_to(ROOT).parts]


def code_spans(text: str) -> list[str]:
    """Inline code of a Markdown text (fenced blocks left out)."""
    return re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))


def code_lines(text: str) -> list[str]:
    """The lines of a Markdown text's fenced blocks (backslash continuations joined) and its inline code."""
    lines = [line for block in re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)
             for line in re.sub(r"\\\n", " ", block).splitlines()]
    return lines + code_spans(text)


def _defined(path: Path) -> set[str]:
    """Names a module defines or imports at any level (read from its source, not imported)."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def module_exists(dotted: str) -> bool:
    """``unlearn_tasks.tofu.task`` (a module or package) or ``unlearn_tasks.tofu.task.TofuTask`` (a name defined
    in it; what follows the first name, such as a method, is not checked)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if base.is_dir() and i == len(parts):
            return True
        if source.is_file():
            return i == len(parts) or parts[i] in _defined(source)
    return False


def missing_names(path: Path) -> list[str]:
    """The backticked paths (``unlearn_tasks/tofu/task.py``), module names (``harness_ext.results``) and file names
    (``cli.py``) of a Markdown file that the checkout does not have."""
    tracked = {p.name for p in ROOT.rglob("*.py")  # ours: not under a hidden folder (.git, a .venv-vllm, ...)
               if not any(part.startswith(".") for part in p.relative_to(ROOT).parts[:-1])} | NOT_OURS
    missing = []
    for span in code_spans(path.read_text()):
        for token in re.findall(r"[\w./<>{}*$-]+", span):
            token = token.rstrip(".")
            if any(c in token for c in "<>{}*$"):  # a pattern (``unlearn_tasks/<name>/``), not a name
                continue
            if "/" in token and token.split("/")[0] in CHECKOUT_DIRS:
                ok = (ROOT / token).exists()
            elif re.fullmatch(r"\w+\.py", token):
                ok = token in tracked
            elif re.fullmatch(rf"(?:{'|'.join(PACKAGES)})(?:\.\w+)+", token):
                ok = module_exists(token)
            else:
                continue
            if not ok:
                missing.append(token)
    blocks = "\n".join(re.findall(r"```[^\n]*\n(.*?)```", path.read_text(), flags=re.S))
    for module, names in re.findall(rf"^\s*from ((?:{'|'.join(PACKAGES)})[\w.]*) import ([\w, ]+)$", blocks, flags=re.M):
        missing += [f"{module}.{n.strip()}" for n in names.split(",") if not module_exists(f"{module}.{n.strip()}")]
    return missing


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_paths_and_modules_exist(path):
    missing = missing_names(path)
    assert not missing, f"{path.relative_to(ROOT)} names what the code does not have: {missing}"


def _subparsers(parser) -> dict:
    import argparse

    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def _known_flags() -> set[str]:
    """Every flag of an ``unlearn`` subcommand, of ``lm_eval`` and ``accelerate launch`` (read from their CLI sources)
    and of benchmarks/."""
    import accelerate.commands.launch
    import lm_eval

    from unlearn_app.cli import build_parser

    flags: set[str] = set()
    todo = [build_parser()]
    while todo:
        parser = todo.pop()
        flags |= set(parser._option_string_actions)
        todo += list(_subparsers(parser).values())
    sources = [*Path(lm_eval.__file__).parent.glob("_cli/*.py"), Path(lm_eval.__file__).parent / "__main__.py",
               Path(accelerate.commands.launch.__file__), *(ROOT / "benchmarks").glob("*.py")]
    for source in sources:
        if source.is_file():
            flags |= set(re.findall(r"[\"'](--[\w-]+)[\"']", source.read_text()))
    return flags | NOT_OURS


def unknown_flags(path: Path, parser, known: set[str]) -> list[str]:
    """``unlearn CMD ... --flag`` where CMD has no such flag, and backticked ``--flag`` that nothing has."""
    text = path.read_text()
    bad = []
    for line in code_lines(text):
        for m in re.finditer(r"(?:^|[\s(;&|$])unlearn\s+([^#|;&)]*)", line):
            words, command, name = m.group(1).split(), parser, ["unlearn"]
            while words and words[0] in _subparsers(command):
                name.append(words[0])
                command = _subparsers(command)[words.pop(0)]
            if len(name) == 1:
                continue
            for word in words:
                flag = word.strip("[]()'\",").split("=")[0]
                if re.fullmatch(r"--[a-z][\w-]*", flag) and flag not in command._option_string_actions:
                    bad.append(f"{' '.join(name)} {flag}")
    bad += [flag for flag in re.findall(r"`(--[a-z][\w-]*)", re.sub(r"```.*?```", "", text, flags=re.S))
            if flag not in known]
    return bad


def test_named_flags_exist():
    from unlearn_app.cli import build_parser

    parser, known = build_parser(), _known_flags()
    bad = {str(p.relative_to(ROOT)): unknown_flags(p, parser, known) for p in PAGES}
    assert not {k: v for k, v in bad.items() if v}, f"flags the commands do not have: {bad}"


def test_the_checks_catch_stale_names(tmp_path):
    from unlearn_app.cli import build_parser

    page = tmp_path / "page.md"
    page.write_text("`harness_ext/lm_eval_compat.py`, `harness_ext.lm_eval_compat.cache_env_info`, `docs.py`,\n"
                    "`harness_ext.lm_eval_patches.no_such_name`, `unlearn_tasks.tofu.task.TofuTask.setup`,\n"
                    "`harness_ext/request_types.py`, `toy_bench/task.py`, `--eval-every`, `--no-such-flag`,\n"
                    "`unlearn run --method npo --lora-rank 8`, `unlearn margins gather --out x`\n\n"
                    "```python\nfrom unlearn_methods.forget_retain import load_qa, load_pairs\n```\n")
    assert missing_names(page) == ["harness_ext/lm_eval_compat.py", "harness_ext.lm_eval_compat.cache_env_info",
                                   "docs.py", "harness_ext.lm_eval_patches.no_such_name", "unlearn_methods.forget_retain.load_pairs"]
    parser = build_parser()
    assert unknown_flags(page, parser, _known_flags()) == ["unlearn run --lora-rank", "--no-such-flag"]


# --------------------------------------------------------------------------- the architecture page's tree
def architecture_tree() -> tuple[set[str], list[str]]:
    """The paths the file tree of docs/architecture.md names (relative to the checkout), and those that do not
    exist. A line is ``NAME[, NAME]  description`` indented two spaces per folder level (a line indented to the
    description column continues the one above); a folder's description names its files, bare (``task.py``)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text[text.index("## The files"):].split("```text\n", 1)[1].split("```", 1)[0]
    named, missing, stack, context = set(), [], [], ""

    def note(token: str, folder: str) -> None:
        path = f"{folder}{token}" if (ROOT / folder / token).exists() or "/" not in token else token
        if any(c in path for c in "<*$"):  # a pattern, not a path
            return
        named.add(path.rstrip("/"))
        if not (ROOT / path).exists():
            missing.append(path)

    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        if indent < 25:
            names, description = re.fullmatch(r"((?:[^\s,]+, )*[^\s,]+)\s*(.*)", line.strip()).groups()
            del stack[indent // 2:]
            parent = "".join(stack)
            for name in names.split(", "):
                note(name, parent)
            folder = names.endswith("/") and "," not in names
            context = f"{parent}{names}" if folder else None
            if folder:
                stack.append(names)
        else:
            description = line
        for token in re.findall(r"[\w./<>*$-]+", description):
            token = token.rstrip(".,")
            if token.endswith((".py", ".sh", ".md", ".yml", ".yaml", ".toml", ".pth")) or token.endswith("/"):
                if context is not None and "/" not in token.rstrip("/"):
                    note(token, context)
                elif "/" in token.rstrip("/"):
                    note(token, context or "")
    return named, missing


def test_architecture_tree_names_every_module_and_nothing_else():
    named, missing = architecture_tree()
    assert not missing, f"docs/architecture.md's tree names paths that do not exist: {missing}"
    modules = {str(p.relative_to(ROOT)) for package in PACKAGES for p in (ROOT / package).rglob("*.py")
               if p.name != "__init__.py" or p.parent.name in PACKAGES}
    unnamed = sorted(modules - named)
    assert not unnamed, f"docs/architecture.md's tree lacks {unnamed}"


def test_metadata_keys_in_examples_are_options():
    """Every key of a ``--metadata '{...}'`` example is an option of a registered benchmark or a model argument
    (what the tasks' unknown-key check accepts), so an example never stops with "unknown --metadata key"."""
    from unlearn_tasks.metadata import MODEL_ARG_KEYS, benchmark_keys

    known = benchmark_keys() | MODEL_ARG_KEYS | {"toy_per_char"}  # the toy benchmark's, installed by its test
    bad = []
    for path in PAGES:
        for line in code_lines(path.read_text()):
            for example in re.findall(r"--(?:eval-)?metadata\s+'(\{[^']*\})'", line):
                bad += [f"{path.relative_to(ROOT)}: {key}" for key in re.findall(r'"(\w+)"\s*:', example)
                        if key not in known]
    assert not bad, f"--metadata keys no task accepts: {bad}"
