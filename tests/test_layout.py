"""The package's shape (ARCHITECTURE.md): imports point down, no cycle, no private name across subpackages.

Read from the source with ``ast``, so that a function-level import counts as much as a module-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ntk_core"
#: The layers, bottom first: a module may import from its own layer or a lower one, never from a higher one.
LAYERS = ("library", "harness", "bookkit")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, list[str], bool]]:
    """``(module imported, names taken from it, at module level)`` for each import of a package module."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(s) for s in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "ntk_core":
                continue
            names = [a.name for a in node.names]
            found.append((target, names, id(node) in top))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "ntk_core":
                    found.append((a.name, [], id(node) in top))
    return found


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(target: str, name: str) -> str:
    """The module a ``from target import name`` binds, when ``name`` is a submodule; else ``target``."""
    return f"{target}.{name}" if f"{target}.{name}" in MODULES else target


def _subpackage(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and f"ntk_core.{parts[1]}" in MODULES and (PACKAGE / parts[1]).is_dir():
        return ".".join(parts[:2])
    return "ntk_core"  # the top-level modules of the library


def _layer(module: str) -> str:
    sub = _subpackage(module)
    if sub == "ntk_core.bookkit":
        return "bookkit"
    if sub == "ntk_core.experiments" or module == "ntk_core.__main__":
        return "harness"
    return "library"


def test_no_import_cycle_between_modules():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for target, names, _ in _imports(path):
            for n in names or [""]:
                dep = _resolve(target, n) if n else target
                if dep in MODULES and dep != module and not module.startswith(dep + "."):
                    graph[module].add(dep)
    # a package's __init__ importing its own submodules is its job; a submodule importing its package's
    # __init__ is what makes a cycle
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(d) :] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_no_private_name_is_imported_from_another_subpackage():
    bad = []
    for module, path in MODULES.items():
        for target, names, _ in _imports(path):
            for n in names:
                if (
                    n.startswith("_")
                    and _resolve(target, n) not in BASE
                    and _subpackage(_resolve(target, n)) != _subpackage(module)
                ):
                    bad.append(f"{module}: from {target} import {n}")
            if any(p.startswith("_") and p != "__main__" for p in target.split(".")[1:]):
                if _subpackage(target) != _subpackage(module) and target not in BASE:
                    bad.append(f"{module}: imports from the private module {target}")
        bad += [
            f"{module}: {use}"
            for use in _private_attributes(path)
            if _subpackage(use.split(" ")[0]) != _subpackage(module)
        ]
    assert not bad, "\n".join(bad)


def _private_attributes(path: Path) -> list[str]:
    """``module._name`` reads of a package module bound by an import (``from .. import bounds; bounds._kernel``)."""
    bound: dict[str, str] = {}
    for target, names, _ in _imports(path):
        for n in names:
            if _resolve(target, n) != target:
                bound[n] = _resolve(target, n)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{bound[node.value.id]} ._{node.attr[1:]}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in bound
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and bound[node.value.id] not in BASE
    ]


#: The library's base, private to the package but shared by all of it: input checks, storage, types.
BASE = ("ntk_core._checks", "ntk_core._store", "ntk_core._typing")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module):
    here = LAYERS.index(_layer(module))
    for target, names, _ in _imports(MODULES[module]):
        for dep in [_resolve(target, n) for n in names] or [target]:
            assert LAYERS.index(_layer(dep)) <= here, f"{module} ({_layer(module)}) imports {dep} ({_layer(dep)})"


def test_the_package_init_only_re_exports():
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    for stmt in tree.body:
        ok = isinstance(stmt, (ast.ImportFrom, ast.Import)) or (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)  # the docstring
        )
        ok = ok or (
            isinstance(stmt, ast.Assign)
            and [t.id for t in stmt.targets if isinstance(t, ast.Name)] in (["__all__"], ["__version__"])
        )
        assert ok, f"ntk_core/__init__.py line {stmt.lineno} does more than re-export"


def test_the_readme_layout_names_every_module():
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("## Layout") :]
    missing = [
        p.relative_to(PACKAGE).as_posix()
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.name != "__init__.py" and p.stem not in layout
    ]
    assert not missing, f"README's layout section does not name: {missing}"


def test_every_import_of_the_package_resolves():
    """Also those inside functions, which run only when called (a moved module's relative imports)."""
    import importlib.util

    bad = []
    for module, path in MODULES.items():
        for target, names, _ in _imports(path):
            if importlib.util.find_spec(target) is None:
                bad.append(f"{module}: no module {target}")
                continue
            mod = importlib.import_module(target)
            bad += [
                f"{module}: {target} has no {n}" for n in names if not hasattr(mod, n) and _resolve(target, n) == target
            ]
    assert not bad, "\n".join(bad)


def test_no_module_level_string_but_the_docstring():
    """Module constants are documented with ``#:`` comments (which Sphinx reads), not with a bare string after
    them: one style (the record fingerprint ignores both, experiments/_code.py)."""
    found = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for stmt in tree.body[1:]:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                found.append(name)
    assert found == [], found
