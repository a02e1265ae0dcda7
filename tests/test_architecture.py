"""The layering of the package, read from the code's own imports (every ``import`` statement, top-level or inside a
function): imports run one way, from the application down to the lm-eval extension, and no modules import each
other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Bottom to top. A module may import its own layer and the layers below it, never one above.
LAYERS = ["harness_ext", "unlearn_tasks", "unlearn_methods", "unlearn_app"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for layer in LAYERS for p in (REPO / layer).rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``path`` imports (``from a import b`` counts as ``a.b`` when that is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def test_the_layers_exist():
    assert all((REPO / layer / "__init__.py").is_file() for layer in LAYERS)


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    upward = sorted(f"{a} -> {b}" for a, targets in _graph().items() for b in targets if _layer(b) > _layer(a))
    assert upward == [], "imports that run back up:\n" + "\n".join(upward)


def test_no_import_cycles():
    graph = _graph()
    # A package's __init__ is imported whenever one of its modules is; an edge *into* a package __init__ from its
    # own submodule is therefore a real cycle, which Tarjan's algorithm below finds like any other.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == [], f"import cycles: {cycles}"


def test_the_checker_sees_a_real_import():
    graph = _graph()
    assert "harness_ext.task_base" in graph["unlearn_tasks.tofu.task"]
    assert "unlearn_methods.training" in graph["unlearn_app.pipeline"]


# --------------------------------------------------------------------------- lm-eval's internals
#: lm-eval modules a layer above ``harness_ext`` may import: lm-eval's documented extension points (a filter class,
#: the model registry) and the package itself. Everything else of lm-eval goes through ``harness_ext``.
PUBLIC_LM_EVAL = {"lm_eval", "lm_eval.api.registry", "lm_eval.api.filter", "lm_eval.api.model"}


#: What ``lm_eval`` itself exports (not modules).
_LM_EVAL_TOP_LEVEL = {"simple_evaluate", "evaluate", "__version__"}


def _lm_eval_imports(path: Path) -> set[str]:
    """The lm-eval modules ``path`` imports (``from lm_eval.x import y`` counts as ``lm_eval.x``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "lm_eval"}
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "lm_eval":
            found.add(node.module)
            if node.module == "lm_eval":  # ``from lm_eval import evaluator_utils``: a module of lm-eval
                found |= {f"lm_eval.{a.name}" for a in node.names if a.name not in _LM_EVAL_TOP_LEVEL}
    return found


def test_only_harness_ext_imports_lm_eval_internals():
    above = {name: path for name, path in _modules().items() if _layer(name) > 0}
    wrong = sorted(f"{name}: {m}" for name, path in above.items() for m in _lm_eval_imports(path)
                   if m not in PUBLIC_LM_EVAL or any(part.startswith("_") for part in m.split(".")))
    assert wrong == [], "lm-eval internals imported above harness_ext (add a harness_ext function):\n" + "\n".join(wrong)


def test_every_lm_eval_module_harness_ext_imports_is_in_the_architecture_table():
    used = {m for name, path in _modules().items() if _layer(name) == 0 for m in _lm_eval_imports(path)}
    page = (REPO / "docs" / "architecture.md").read_text()
    table = page[page.index("## lm-eval's internals"):]
    missing = sorted(m for m in used if f"`{m}" not in table)
    assert used and missing == [], f"lm-eval modules harness_ext uses, missing from docs/architecture.md: {missing}"


def test_the_lm_eval_checker_sees_a_real_import():
    assert "lm_eval.tasks._index" in _lm_eval_imports(REPO / "harness_ext" / "task_index.py")
    assert "lm_eval.api.filter" in _lm_eval_imports(REPO / "unlearn_tasks" / "waterdrum" / "task.py")
