"""Sphinx extension for this book's API reference (``book/api.md``, ``book/api/*.md``).

Autodoc documents each module of ``ntk_core`` from its docstrings. This extension keeps that
reference complete and clean:

* every name in a documented module's ``__all__`` is documented, a constant without a doc comment
  included (autodoc would skip an annotated one);
* a constant without a doc comment shows no docstring rather than the docstring of its type
  (``dict``, ``tuple``: text about the builtin, not about ``ntk_core``);
* the first line of a constant's or attribute's doc comment is prose even when it has a colon
  (napoleon would read ``text: more`` as ``type: description``);
* ``|x − y|`` in a docstring's prose is an absolute value, not a reStructuredText substitution
  (``ntk_core`` defines none): bars outside literals, roles and math blocks are escaped;
* an annotation that names a type alias (``ArrayLike``, documented as data) links to it;
* a dataclass field's ``default_factory`` is named in the signature (not ``<factory>``);
* at the end of the build, a public name of a documented module that has no entry in the reference
  (under that module, or for a subpackage's re-export under one of its submodules) is a warning, so the strict build (``-W``) fails when the reference and the package drift apart.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from typing import Any

from sphinx.util import logging
from sphinx.util.nodes import make_refnode

logger = logging.getLogger(__name__)

_DOCUMENTED_MODULES: set[str] = set()


def _public_names(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    return list(getattr(module, "__all__", []))


_LITERAL = re.compile(r"(``.+?``|:[a-z:]+:`[^`]+`|`[^`]+`_?)")


def _escape_bars(line: str) -> str:
    pieces = _LITERAL.split(line)
    for i in range(0, len(pieces), 2):  # even pieces are outside literals and roles
        if pieces[i].count("|") >= 2:
            pieces[i] = re.sub(r"(?<!\\)\|", r"\\|", pieces[i])
    return "".join(pieces)


def _escape_absolute_values(lines: list[str]) -> None:
    block_indent: int | None = None  # inside a directive's content (math, code): left as it is
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if block_indent is not None:
            if not stripped or indent > block_indent:
                continue
            block_indent = None
        if stripped.startswith(".. ") and "::" in stripped or stripped.endswith("::"):
            block_indent = indent
            continue
        if stripped.startswith(("| ", "+-", "+=", ">>>", "...")):
            continue  # grid tables, line blocks, doctest code
        lines[i] = _escape_bars(line)


def _clean_docstring(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    if what == "module":
        _DOCUMENTED_MODULES.add(name)
    elif what in ("data", "attribute") and not inspect.isclass(obj) and not inspect.isroutine(obj):
        type_doc = inspect.getdoc(type(obj))
        if type_doc and " ".join("\n".join(lines).split()) == " ".join(type_doc.split()):
            lines.clear()
            return
        if lines and re.match(r"[^:`]* [^:`]*: ", lines[0]):
            # napoleon reads "text: more" on an attribute's first line as "type: description"
            lines[0] = lines[0].replace(": ", " — ", 1)
    _escape_absolute_values(lines)


def _check_complete(app: Any, env: Any) -> None:
    documented = set(env.get_domain("py").objects)
    for module_name in sorted(_DOCUMENTED_MODULES):
        for name in _public_names(module_name):
            # a subpackage's re-export counts where the submodule that defines it is documented
            here = f"{module_name}.{name}"
            inside = (d for d in documented if d.startswith(f"{module_name}.") and d.endswith(f".{name}"))
            if here not in documented and next(inside, None) is None:
                logger.warning(f"API reference: {module_name}.{name} is public (in __all__) but not documented")


def _resolve_type_alias(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """An annotation names a type alias (``ArrayLike``) as a class: link it to the alias's entry."""
    if node.get("refdomain") != "py" or node.get("reftype") != "class":
        return None
    entry = env.get_domain("py").objects.get(node.get("reftarget", ""))
    if entry is None or entry.objtype not in ("data", "type"):
        return None
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, node["reftarget"])


def _factory_defaults(
    app: Any, what: str, name: str, obj: Any, options: Any, signature: str | None, return_annotation: str | None
) -> tuple[str | None, str | None] | None:
    """A dataclass field with a ``default_factory`` shows as ``<factory>``: name the factory instead."""
    if not signature or "<factory>" not in signature or not dataclasses.is_dataclass(obj):
        return None
    for field in dataclasses.fields(obj):
        factory = field.default_factory
        if factory is not dataclasses.MISSING:
            label = getattr(factory, "__name__", "")
            label = f"{label}()" if label and label != "<lambda>" else "..."
            signature = signature.replace("<factory>", label, 1)
    return signature, return_annotation


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-process-docstring", _clean_docstring, priority=100)  # before napoleon (500)
    app.connect("env-check-consistency", _check_complete)
    app.connect("missing-reference", _resolve_type_alias)
    app.connect("autodoc-process-signature", _factory_defaults)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
