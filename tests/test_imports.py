"""The package's import graph: no cycles between modules, and no upward imports across the layers
core -> (callbacks, loggers, compat) -> families -> app (docs/architecture.md).

The graph is read from the source (an AST walk, every ``import`` wherever it stands: module level, in a function, under
``TYPE_CHECKING``, and each module a family names with ``Later("module", "name")`` for import on first use), so it
holds for lazy imports too."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "lightning_hooks"

#: modules of the app layer: entry points and what builds on the family registry
APP = {f"{PACKAGE}.{m}" for m in ("__init__", "__main__", "adapt", "cli", "config", "config_schema", "console", "demo",
                                  "lifecycle", "lightning_cli", "train")}  # fmt: skip  # one set, wrapped
#: the registry of families (lightning_hooks/families/__init__.py): above every family, below the app
REGISTRY = f"{PACKAGE}.families"
#: layers below the families, lowest first; a module may import its own layer and the ones before it
LOWER = (f"{PACKAGE}.core", f"{PACKAGE}.callbacks", f"{PACKAGE}.loggers", f"{PACKAGE}.compat")


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``'s name without ``.__init__``)."""
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1 and parts != [PACKAGE, "__init__"]:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The package modules ``name`` imports (``from a import b`` counts as ``a.b`` when that is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Later" and node.args:
            # a family's piece named for import on first use (core/family.py's Later("module", "name"))
            first = node.args[0]
            targets = [first.value] if isinstance(first, ast.Constant) and isinstance(first.value, str) else []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            if target == PACKAGE:
                target = f"{PACKAGE}.__init__"
            if target in known:
                yield target


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: set(imports(name, path, known)) - {name} for name, path in found.items()}


def layer(module: str) -> tuple[int, str]:
    """(rank, group): a module may import modules of a lower rank, or of its own rank and group."""
    if module in APP or module.count(".") == 1 and not module.startswith(LOWER + (REGISTRY,)):
        return 3, "app"
    if module == REGISTRY:
        return 2, "registry"
    if module.startswith(REGISTRY + "."):
        return 1, module.split(".")[2]  # each family is its own group: one family does not import another
    for rank, prefix in enumerate(LOWER):
        if module == prefix or module.startswith(prefix + "."):
            return 0, str(rank)
    raise AssertionError(f"{module}: no layer; add it to APP or LOWER in {__file__}")


def upward_imports() -> list[str]:
    wrong = []
    for module, targets in graph().items():
        rank, group = layer(module)
        for target in sorted(targets):
            target_rank, target_group = layer(target)
            lower_layer_order = rank == 0 and target_rank == 0 and int(target_group) > int(group)
            if target_rank > rank or (target_rank == rank and target_group != group and rank != 0) or lower_layer_order:
                wrong.append(f"{module} -> {target}")
    return wrong


def cycles() -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan)."""
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_walk_sees_lazy_and_relative_imports():
    edges = graph()
    assert f"{PACKAGE}.core.adapter" in edges[f"{PACKAGE}.core.family"]
    assert f"{PACKAGE}.families" in edges[f"{PACKAGE}.adapt"]  # from lightning_hooks import families
    assert f"{PACKAGE}.families.mmengine.config" in edges[f"{PACKAGE}.families.mmengine"]  # inside a function
    assert f"{PACKAGE}.families.mmengine.vis_backend" in edges[f"{PACKAGE}.families.mmengine"]  # Later("...", ...)


def test_no_upward_imports():
    """core imports only core; callbacks, loggers and compat only what is below them; a family only the layers below
    and itself (not the registry, another family or an app module); nothing imports the app layer but the app."""
    assert upward_imports() == []


def test_no_import_cycles():
    assert cycles() == []
