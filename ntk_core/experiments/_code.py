"""Which code computes an experiment's numbers, and its fingerprint (the ``code`` part of a result's identity).

A cached or recorded result is current only while the code that produced it is unchanged. "The code" is taken
narrowly, so that editing documentation, type annotations or an unrelated function leaves results current,
while any change to what the computation executes does not:

* start from the experiment module's ``compute`` and ``Config``;
* include each top-level statement that defines a name the included code uses, in that module or, through
  its ``import`` statements, in the ``ntk_core`` module it comes from (``from ..ntk import empirical_ntk``
  follows ``empirical_ntk`` into ``ntk.py``; ``data.load_mnist`` after ``from .. import data`` follows
  ``load_mnist`` into ``data.py``), transitively; a module used as a whole value is included whole;
* top-level statements that define nothing (``if …:`` blocks, bare calls) are always included;
* each statement enters as the dump of its syntax tree without docstrings, other bare strings (an attribute's
  docstring), comments or type annotations (``__all__`` and ``if TYPE_CHECKING:`` blocks are left out: they do
  not change what runs);
* a class's profile constructors (the class methods ``quick``, ``medium`` and ``full`` of a ``Config``) and the
  field defaults of a ``Config`` are left out as well: they only choose a config's values, and the resolved
  values are part of a result's identity beside the code (``_runner.run_experiment``; a record whose profile
  resolves to other values is stale for that reason), so that sizing one profile leaves the others' results
  current.

:func:`code_fingerprint` hashes the included statements as a sorted set, **without the modules they sit in**:
moving a function or class to another module (and changing the ``import`` lines that find it) leaves the
fingerprint as it was, so that the package's layout can change without making its records stale. An
``import`` of the package's own modules enters only through the statements it leads to; an import from
outside the package (``numpy``, ``torch``, ...) enters as ``module:name as alias`` for each name the code
uses, so that taking a name from another library does change it.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
from pathlib import Path

from .profile import PROFILES as PROFILE_METHODS  # the class methods that construct the profiles

__all__ = ["code_fingerprint", "included_code"]

_PACKAGE = Path(__file__).resolve().parents[1]


def _is_profile_method(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.FunctionDef)
        and stmt.name in PROFILE_METHODS
        and any(isinstance(d, ast.Name) and d.id == "classmethod" for d in stmt.decorator_list)
    )


def _is_bare_string(stmt: ast.stmt) -> bool:
    """A statement that is only a string: a docstring, or an attribute's docstring after an assignment."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _strip(node: ast.AST) -> ast.AST:
    """``node`` without docstrings and other bare strings, type annotations, profile constructors and the field
    defaults of a ``Config`` (in place)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.ClassDef):
            sub.body = [s for s in sub.body if not _is_profile_method(s)] or [ast.Pass()]
            if sub.name == "Config":  # its field defaults: the resolved config is in a result's identity
                for stmt in sub.body:
                    if isinstance(stmt, ast.AnnAssign):
                        stmt.value = None
        for field in ("body", "orelse", "finalbody"):
            block = getattr(sub, field, None)
            if isinstance(block, list) and any(isinstance(s, ast.stmt) and _is_bare_string(s) for s in block):
                setattr(
                    sub,
                    field,
                    [s for s in block if not _is_bare_string(s)] or ([ast.Pass()] if field == "body" else []),
                )
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sub.returns = None
        elif isinstance(sub, ast.arg):
            sub.annotation = None
        elif isinstance(sub, ast.AnnAssign):
            sub.annotation = ast.Constant(None)
    return node


def _is_type_checking(stmt: ast.stmt) -> bool:
    test = stmt.test if isinstance(stmt, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Module:
    """One parsed module: which top-level statement binds each name, and where its imports lead."""

    def __init__(self, path: Path, package: Path) -> None:
        self.path = path
        self.package = package
        tree = ast.parse(path.read_text(encoding="utf-8"))
        _strip(tree)
        self.statements = [s for s in tree.body if not _is_type_checking(s) and not self._is_all(s)]
        self.binds: dict[str, int] = {}
        self.imports: dict[str, tuple[Path, str | None]] = {}  # name -> (module file, name in it | None: whole)
        for i, stmt in enumerate(self.statements):
            for name in self._bound(stmt):
                self.binds.setdefault(name, i)

    @staticmethod
    def _is_all(stmt: ast.stmt) -> bool:
        targets = (
            stmt.targets
            if isinstance(stmt, ast.Assign)
            else [stmt.target]
            if isinstance(stmt, (ast.AnnAssign, ast.AugAssign))
            else []
        )
        return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)

    def _file(self, parts: tuple[str, ...]) -> Path | None:
        target = self.package.parent.joinpath(*parts)
        for file in (target.with_suffix(".py"), target / "__init__.py"):
            if file.is_file():
                return file
        return None

    def resolve(self, stmt: ast.Import | ast.ImportFrom) -> list[tuple[str, tuple[Path, str | None] | None]]:
        """Each name an import binds, with where it leads in the package: ``(module file, name | None: the whole
        module)``, or ``None`` for a name from outside the package."""
        found: list[tuple[str, tuple[Path, str | None] | None]] = []
        here = self.path.parent.relative_to(self.package.parent).parts
        for alias in stmt.names:
            bound = alias.asname or alias.name.split(".")[0]
            target: tuple[Path, str | None] | None = None
            if isinstance(stmt, ast.ImportFrom):
                base = here[: len(here) - stmt.level + 1] if stmt.level else ()
                parts = (*base, *(stmt.module.split(".") if stmt.module else ()))
                if parts and parts[0] == self.package.name:
                    as_module = self._file((*parts, alias.name))
                    if as_module is not None:
                        target = (as_module, None)
                    elif (source := self._file(parts)) is not None:
                        target = (source, alias.name)
            else:
                parts = tuple(alias.name.split("."))
                if parts[0] == self.package.name and (source := self._file(parts)) is not None:
                    target = (source, None)
            found.append((bound, target))
        return found

    def _bound(self, stmt: ast.stmt) -> list[str]:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return [stmt.name]
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names = []
            for bound, target in self.resolve(stmt):
                names.append(bound)
                if target is not None:
                    self.imports[bound] = target
            return names
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets = [stmt.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _uses(stmt: ast.AST) -> tuple[set[str], set[tuple[str, str]]]:
    """Names a statement reads, and ``(name, attribute)`` pairs of ``name.attribute`` reads."""
    names, attributes = set(), set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            attributes.add((node.value.id, node.attr))
        elif isinstance(node, ast.Name):
            names.add(node.id)
    return names, attributes


def included_code(roots: dict[Path, set[str]], package: Path = _PACKAGE) -> dict[Path, list[str]]:
    """The code reachable from ``roots`` (module file -> names): per module, the included statements' dumps.

    The root name ``"*"`` includes a whole module.
    """
    modules: dict[Path, _Module] = {}
    included: dict[Path, set[int]] = {}
    external: dict[Path, set[str]] = {}  # names bound by imports from outside the package that the code uses
    todo: list[tuple[Path, str]] = [(path, name) for path, names in roots.items() for name in names]

    def module(path: Path) -> _Module:
        if path not in modules:
            modules[path] = _Module(path, package)
            included[path] = set()
            external[path] = set()
            # statements that bind nothing run on import: always part of the code
            for i, stmt in enumerate(modules[path].statements):
                if not modules[path]._bound(stmt):
                    include(path, i)
        return modules[path]

    def include(path: Path, index: int) -> None:
        if index in included[path]:
            return
        included[path].add(index)
        m = modules[path]
        stmt = m.statements[index]
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return  # an import counts through the names it brings that the code uses
        for node in ast.walk(stmt):  # an import inside a function: follow what it brings from the package
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node is not stmt:
                for _, target in m.resolve(node):
                    if target is not None:
                        todo.append((target[0], target[1] if target[1] is not None else "*"))
        names, attributes = _uses(stmt)
        for name, attr in attributes:
            target = m.imports.get(name)
            if target is not None and target[1] is None:  # module.attribute: follow the attribute only
                todo.append((target[0], attr))
                included[path].add(m.binds[name])
                if not _used_bare(stmt, name):
                    names.discard(name)
        todo.extend((path, name) for name in names)

    while todo:
        path, name = todo.pop()
        m = module(path)
        if name == "*":
            for i in range(len(m.statements)):
                include(path, i)
            continue
        if name in m.imports:
            source, attr = m.imports[name]
            included[path].add(m.binds[name])
            todo.append((source, attr if attr is not None else "*"))
        elif name in m.binds:
            if isinstance(m.statements[m.binds[name]], (ast.Import, ast.ImportFrom)):
                external[path].add(name)
            include(path, m.binds[name])
    return {
        path: [_entry(modules[path].statements[i], external[path]) for i in sorted(idx)]
        for path, idx in included.items()
    }


def _entry(stmt: ast.stmt, external: set[str]) -> str:
    """What one included statement contributes: its syntax tree's dump; for an import, ``module:name as alias``
    of each name from outside the package that the code uses (imports within the package contribute nothing:
    the statements they lead to are included themselves)."""
    if isinstance(stmt, ast.Import):
        return "\n".join(
            f"import {a.name} as {a.asname or a.name}"
            for a in stmt.names
            if (a.asname or a.name.split(".")[0]) in external
        )
    if isinstance(stmt, ast.ImportFrom):
        if stmt.level or (stmt.module or "").split(".")[0] == _PACKAGE.name:
            return ""
        return "\n".join(
            f"from {stmt.module}:{a.name} as {a.asname or a.name}"
            for a in stmt.names
            if (a.asname or a.name) in external
        )
    nested = copy.deepcopy(stmt)
    for node in ast.walk(nested):  # an import of the package inside a function: where it comes from does not count
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == _PACKAGE.name):
            node.module, node.level = _PACKAGE.name, 0
    return ast.dump(nested)


def _used_bare(stmt: ast.AST, name: str) -> bool:
    """Whether ``name`` is read other than as ``name.attribute`` (then the whole module counts)."""
    parents = {id(child): node for node in ast.walk(stmt) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and node.id == name:
            parent = parents.get(id(node))
            if not (isinstance(parent, ast.Attribute) and parent.value is node):
                return True
    return False


def code_fingerprint(experiment: str | None = None, package: Path = _PACKAGE) -> str:
    """SHA-256 (first 12 hex digits) of the ``ntk_core`` code that computes ``experiment``'s numbers.

    With ``experiment``: the code reachable from ``experiments/<experiment>.py``'s ``compute`` and ``Config``
    (see the module docstring); without it, every statement of every module of the package. Computed once
    per state of the package's files (their paths, sizes and modification times).
    """
    state = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(package.rglob("*.py")))
    return _fingerprint(experiment, package, state)


@functools.lru_cache(maxsize=64)
def _fingerprint(experiment: str | None, package: Path, state: tuple) -> str:
    if experiment is None:
        roots = {path: {"*"} for path in sorted(package.rglob("*.py"))}
    else:
        start = package / "experiments" / f"{experiment}.py"
        if not start.is_file():
            raise ValueError(f"no experiment module {start.name} in {package.name}/experiments")
        roots = {start: {"compute", "Config"}}
    entries = sorted({text for statements in included_code(roots, package).values() for text in statements if text})
    h = hashlib.sha256()
    for text in entries:
        h.update(text.encode())
        h.update(b"\0")
    return h.hexdigest()[:12]
