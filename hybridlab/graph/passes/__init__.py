"""The compiler passes and the one place that sequences them.

Every pass is a pure function ``Graph -> (Graph, changes)`` named by a verb; ``changes``
is a list of human-readable strings (empty when nothing changed). :data:`PIPELINE` is the
order they run in; :func:`run_pipeline` is the only sequencer. It keeps a
:class:`PassRecord` (before, after, changes) per pass so lessons can show what each pass
did, and, when asked (or when the ``VERIFY`` flag is set), runs ``ir.verify`` after
every pass so a broken invariant is blamed on the pass that broke it.

A pass that needs to know what the program is compiled for takes a second argument, the
:class:`PassContext` (``training``: BatchNorm lowers differently while training); a pass
that needs nothing of it takes the graph alone. ``run_pipeline`` asks each pass's
signature, so no pass is special-cased here.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hybridlab import config
from hybridlab.errors import GraphError
from hybridlab.graph.ir import Graph, Node
from hybridlab.graph.ir import verify as verify_graph
from hybridlab.graph.passes.context import PassContext
from hybridlab.graph.passes.eliminate_common_subexpressions import eliminate_common_subexpressions
from hybridlab.graph.passes.eliminate_dead_code import eliminate_dead_code
from hybridlab.graph.passes.fold_batchnorm import FOLDED_FROM, fold_batchnorm, recipe
from hybridlab.graph.passes.fold_constants import fold_constants
from hybridlab.graph.passes.fuse_elementwise import fuse_elementwise
from hybridlab.graph.passes.lower_operators import lower_operators
from hybridlab.graph.passes.plan_memory import MemoryPlan, plan_memory
from hybridlab.graph.passes.pretranspose_weights import LAYOUT_OF

Pass = Callable[..., "tuple[Graph, list[str]]"]  # (graph) or (graph, context)

PIPELINE: tuple[Pass, ...] = (
    fold_batchnorm,  # inference only; reads BatchNorm whole, so before it is lowered
    lower_operators,  # every later pass sees primitive operators only
    fold_constants,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fuse_elementwise,
    plan_memory,
)


@dataclass(frozen=True)
class PassRecord:
    """What one pass did: the graph before and after, and its list of changes."""

    name: str
    before: Graph
    after: Graph
    changes: list[str]


def run_pipeline(graph: Graph, disabled: Sequence[str] = (), verify: bool | None = None,
                 passes: Sequence[Pass] = (), context: PassContext | None = None
                 ) -> tuple[Graph, list[PassRecord]]:
    """Run every pass of :data:`PIPELINE` not named in ``disabled``, in order.

    ``context`` says what the program is compiled for (default: prediction,
    ``PassContext()``); passes that take a second argument receive it.

    ``passes`` adds your own passes (pure ``Graph -> (Graph, changes)`` functions, named by
    their ``__name__``): they run after folding, CSE and dead-code elimination, and before
    fusion and the memory plan, which must see the operators your rewrite leaves. With
    ``verify`` (or the ``VERIFY`` flag) each pass's result is checked by ``ir.verify``, so
    a broken user pass is named at once.
    """
    pipeline = _with_user_passes(passes)
    unknown = set(disabled) - {p.__name__ for p in pipeline}
    if unknown:
        raise ValueError(f"unknown pass(es) {sorted(unknown)}; the pipeline has "
                         f"{[p.__name__ for p in pipeline]}")
    check = bool(config.flag("VERIFY")) if verify is None else verify
    context = PassContext() if context is None else context
    records: list[PassRecord] = []
    for compiler_pass in pipeline:
        if compiler_pass.__name__ in disabled:
            continue
        before = graph
        result = (compiler_pass(graph, context) if takes_context(compiler_pass)
                  else compiler_pass(graph))
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], Graph)):
            raise TypeError(f"pass {compiler_pass.__name__} must return (Graph, list of "
                            f"changes), got {type(result).__name__}")
        graph, changes = result
        records.append(PassRecord(compiler_pass.__name__, before, graph, changes))
        if check:
            try:
                verify_graph(graph)
            except GraphError as err:
                raise GraphError(f"after pass {compiler_pass.__name__}: {err}") from None
    return graph, records


def takes_context(compiler_pass: Pass) -> bool:
    """Whether a pass takes ``(graph, context)`` rather than ``(graph)``."""
    try:
        parameters = inspect.signature(compiler_pass).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: give it the graph
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY,
                                                      p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in parameters)


# NOTE: [Derived inputs] a pass that wants a weight in another form (transposed, folded
# with a BatchNorm) cannot compute it: it sees the graph, not the values. It adds a new
# graph input, a ``var`` whose attributes say what it is computed from, and the caller
# (CachedOp, or a test feeding ``graph.evaluate``) computes it with the function below.
Derivation = tuple[tuple[str, ...], Callable[..., np.ndarray]]


def derived_input(node: Node) -> Derivation | None:
    """For an input a pass added: the names of the inputs it is computed from ("" for an
    absent one, whose value is None) and the function of their values that computes it;
    None for any other input."""
    attrs = dict(node.attrs)
    if LAYOUT_OF in attrs:  # pretranspose_weights
        return (attrs[LAYOUT_OF],), np.transpose
    if FOLDED_FROM in attrs:  # fold_batchnorm
        return recipe(node)
    return None


def derived_values(graph: Graph, values: Mapping[str, Any]) -> list[Any]:
    """The arrays for ``graph.inputs``: ``values`` by name, and each derived input computed
    from them (for feeding ``graph.evaluate`` or a compiled program by hand)."""
    arrays = []
    for node in graph.inputs:
        derivation = derived_input(node)
        if derivation is None:
            arrays.append(values[node.name])
        else:
            sources, make = derivation
            arrays.append(make(*(values[s] if s else None for s in sources)))
    return arrays


def _with_user_passes(passes: Sequence[Any]) -> tuple[Pass, ...]:
    for extra in passes:
        if not callable(extra) or not getattr(extra, "__name__", "").isidentifier():
            raise TypeError(f"a pass must be a named function (graph) or (graph, context) -> "
                            f"(Graph, changes), got {extra!r}")
    at = PIPELINE.index(fuse_elementwise)
    return (*PIPELINE[:at], *passes, *PIPELINE[at:])


__all__ = [
    "PIPELINE", "Derivation", "MemoryPlan", "derived_input", "derived_values", "fold_batchnorm",
    "PassContext", "PassRecord", "eliminate_common_subexpressions",
    "eliminate_dead_code", "fold_constants", "fuse_elementwise", "lower_operators", "plan_memory",
    "run_pipeline", "takes_context",
]
