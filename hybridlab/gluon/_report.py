"""The hybridization report: what a trace ran once, and so dropped or froze.

What this module teaches
------------------------
``hybridize()`` runs a block's Python exactly once, with Symbols, and keeps only the
operators it recorded. Everything else the Python did happens *at trace time only*:

* a ``print`` prints once (the seed's "the three prints printed nothing" on later calls);
* an ``if``/``while``/``x if c else y`` on a Python value is decided once, and only the
  path taken is compiled; a ``for`` loop is unrolled into as many steps as it ran;
* a Python number read from outside ``hybrid_forward`` -- ``self.scale``,
  ``self.cfg["k"]``, a module-level ``SCALE``, a closure variable -- is baked into the
  program as a constant, so changing it later has no effect until ``hybridize()`` is
  called again.

Not reported: ``if autograd.is_training():``. A hybridized block compiles one program
per mode, so that test is decided again for each mode, which is what it means.

How the findings are found: the tracer (``gluon/_trace.py``) calls :func:`inspect_line`
before each line of the user's ``hybrid_forward`` runs. The function's source is parsed
once with :mod:`ast`, and each statement is indexed by its lines with the conditions it
decides in Python, whether it loops, and the outside values it reads. Those values are
looked up in the running frame -- only plain ``name.attr[constant]`` chains, so looking
never calls user code or pushes an operator.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import numbers
import os
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any

from hybridlab.graph.codegen import parse_source

_MISSING = object()
_SHOWN_TYPES = (numbers.Number, str, type(None))  # values worth printing in a branch entry


@dataclass
class HybridizationReport:
    """What the last trace dropped or froze: ``(kind, where, text)`` entries, each once."""

    block: str
    entries: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, where, text)
    # not dropped or frozen, but chosen at the first call: the weights' layout per input
    # signature, with the times measured (NOTE [Layout by measurement] in cached_op.py)
    layouts: list[str] = field(default_factory=list)
    # and each convolution's algorithm (NOTE [Convolution algorithms])
    convolutions: list[str] = field(default_factory=list)

    def add(self, kind: str, where: str, text: str) -> None:
        if (kind, where, text) not in self.entries:
            self.entries.append((kind, where, text))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __str__(self) -> str:
        if not self.entries:
            lines = [f"hybridization report for {self.block}: nothing was dropped or frozen"]
        else:
            lines = [f"hybridization report for {self.block} (these ran once, at trace time):"]
        lines += [f"  [{kind}] {where}: {text}" for kind, where, text in self.entries]
        lines += [f"  [layout] {text}" for text in self.layouts]
        lines += [f"  [convolution] {text}" for text in self.convolutions]
        return "\n".join(lines)


@dataclass(frozen=True)
class _Statement:
    """What one statement of ``hybrid_forward`` does in Python rather than in the graph."""

    line: int  # its first line: the one the report quotes
    tests: tuple[ast.expr, ...]  # conditions decided in Python: if, while, x if c else y
    loops: bool  # a for loop: unrolled
    reads: tuple[ast.expr, ...]  # name.attr[constant] chains that may read outside values


def inspect_line(report: HybridizationReport, frame: Any) -> None:
    """Note the branches, loops and frozen numbers of the statement about to run."""
    statement = _index(frame.f_code).get(frame.f_lineno)
    if statement is None:
        return
    filename = frame.f_code.co_filename
    text = linecache.getline(filename, statement.line).strip()
    where = f"{os.path.basename(filename)}:{statement.line} `{text}`"
    for test in statement.tests:
        if not _decided_per_mode(test):
            values = [f"{ast.unparse(n)} = {v!r}" for n, v in _values(_chains(test), frame)
                      if isinstance(v, _SHOWN_TYPES)]
            shown = f" ({', '.join(values)})" if values else ""
            report.add("branch", where, f"decided on Python values at trace time{shown}; "
                       "only the path taken is compiled (use F.where / F.contrib.cond to "
                       "keep both)")
    if statement.loops:
        report.add("loop", where, "a Python loop runs at trace time: the program holds the "
                   "steps this trace took, unrolled, and no loop")
    for node, value in _values(statement.reads, frame):
        if isinstance(value, numbers.Number):
            report.add("constant", where, f"{ast.unparse(node)} = {value!r} is frozen into "
                       "the program; call hybridize() again after changing it")


@functools.lru_cache(maxsize=256)
def _index(code: types.CodeType) -> dict[int, _Statement]:
    """Every line of the function's statements -> the statement (empty without source)."""
    try:
        lines, first = inspect.getsourcelines(code)
        tree = parse_source(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):  # exec'd code, or a lambda mid-expression
        return {}
    index: dict[int, _Statement] = {}
    function = tree.body[0]
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        _index_body(function.body, first - 1, index)
    return index


def _index_body(body: list[ast.stmt], offset: int, index: dict[int, _Statement]) -> None:
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # a nested definition runs only when called: not a line of this trace
        exprs = _header(stmt)
        tests = [stmt.test] if isinstance(stmt, (ast.If, ast.While)) else []
        tests += [n.test for e in exprs for n in ast.walk(e) if isinstance(n, ast.IfExp)]
        reads = [chain for e in exprs for chain in _chains(e, tests)]
        last = max((getattr(e, "end_lineno", None) or stmt.lineno for e in exprs),
                   default=stmt.lineno)
        entry = _Statement(stmt.lineno + offset, tuple(tests), isinstance(stmt, ast.For),
                           tuple(reads))
        for line in range(stmt.lineno, last + 1):
            index.setdefault(line + offset, entry)
        inner = [child for child in ast.iter_child_nodes(stmt) if isinstance(child, ast.stmt)]
        _index_body(inner, offset, index)  # the body, and else/elif (an If in orelse)


def _header(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates itself, not in its body."""
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, ast.For):
        return [stmt.iter]
    return [] if hasattr(stmt, "body") else [stmt]  # with/try: only their bodies


def _chains(node: ast.AST, tests: list[ast.expr] | tuple = ()) -> list[ast.expr]:
    """The outermost ``name.attr[constant]`` chains in ``node``, not inside ``tests``."""
    if any(node is test for test in tests):
        return []
    if _is_chain(node):
        return [node]  # type: ignore[list-item]
    return [chain for child in ast.iter_child_nodes(node) for chain in _chains(child, tests)]


def _is_chain(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return isinstance(node.ctx, ast.Load)
    if isinstance(node, ast.Attribute):
        return _is_chain(node.value)
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and _is_chain(node.value)
    return False


def _decided_per_mode(test: ast.expr) -> bool:
    """``autograd.is_training()`` (or its ``not``): each mode has its own program."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if not isinstance(test, ast.Call):
        return False
    function = test.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    return name == "is_training"


def _values(chains: Any, frame: Any) -> list[tuple[ast.expr, Any]]:
    found = [(node, _lookup(node, frame)) for node in chains]
    return [(node, value) for node, value in found if value is not _MISSING]


def _lookup(node: ast.expr, frame: Any) -> Any:
    """The value of a chain rooted at ``self``, a global or a closure variable; locals and
    modules (``np.pi``) give ``_MISSING``, and no code is called but ``getattr``."""
    if isinstance(node, ast.Name):
        code = frame.f_code
        if node.id == "self" or node.id in code.co_freevars:
            return frame.f_locals.get(node.id, _MISSING)
        if node.id in code.co_varnames or node.id in code.co_cellvars:
            return _MISSING  # computed inside hybrid_forward: not captured from outside
        return frame.f_globals.get(node.id, _MISSING)
    owner = _lookup(node.value, frame)  # type: ignore[attr-defined]
    if owner is _MISSING or isinstance(owner, types.ModuleType):
        return _MISSING
    if isinstance(node, ast.Attribute):
        try:
            return getattr(owner, node.attr, _MISSING)
        except Exception:  # a property that fails: nothing to report
            return _MISSING
    if isinstance(owner, (dict, list, tuple)):  # never index an NDArray: that is an op
        try:
            return owner[node.slice.value]  # type: ignore[attr-defined]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return _MISSING
