"""The compiler passes and the one place that sequences them.

Every pass is a pure function ``pass(graph, context) -> PassResult`` named by a verb
(``context.py``): the graph, and a :class:`PassContext` saying what the program is
compiled for (``training``: BatchNorm lowers differently while training; a pass that needs
nothing of it ignores it); the result holds the new graph, a list of human-readable
changes (empty when nothing changed) and the pass's notes for the pass explorer.
:data:`PIPELINE` is the order they run in; :func:`run_pipeline` is the only sequencer,
and it calls every pass the same way. It keeps a :class:`PassRecord` (before, after,
changes, notes) per pass so lessons can show what each pass did, and, when asked (or
when the ``VERIFY`` flag is set), runs ``ir.verify`` after every pass so a broken
invariant is blamed on the pass that broke it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from hybridlab import config
from hybridlab.errors import GraphError
from hybridlab.graph.ir import Graph
from hybridlab.graph.ir import verify as verify_graph
from hybridlab.graph.passes.choose_convolutions import choose_convolutions
from hybridlab.graph.passes.context import PREDICTION, Note, PassContext, PassResult
from hybridlab.graph.passes.derived import Derivation, derived_input, derived_values
from hybridlab.graph.passes.eliminate_common_subexpressions import eliminate_common_subexpressions
from hybridlab.graph.passes.eliminate_dead_code import eliminate_dead_code
from hybridlab.graph.passes.fold_batchnorm import fold_batchnorm
from hybridlab.graph.passes.fold_constants import fold_constants
from hybridlab.graph.passes.fuse_elementwise import fuse_elementwise
from hybridlab.graph.passes.lower_operators import lower_operators
from hybridlab.graph.passes.plan_memory import MemoryPlan, plan_memory
from hybridlab.graph.passes.pretranspose_weights import pretranspose_weights

Pass = Callable[[Graph, PassContext], PassResult]

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
    """What one pass did: the graph before and after, its list of changes, its notes."""

    name: str
    before: Graph
    after: Graph
    changes: list[str]
    notes: tuple[Note, ...] = ()


def run_pipeline(graph: Graph, disabled: Sequence[str] = (), verify: bool | None = None,
                 passes: Sequence[Pass] = (), context: PassContext | None = None
                 ) -> tuple[Graph, list[PassRecord]]:
    """Run every pass of :data:`PIPELINE` not named in ``disabled``, in order.

    ``context`` says what the program is compiled for (default: prediction,
    ``PassContext()``); every pass receives it.

    ``passes`` adds your own passes (pure ``(graph, context) -> (graph, changes)``
    functions, named by their ``__name__``): they run after folding, CSE and dead-code
    elimination, and before fusion and the memory plan, which must see the operators your
    rewrite leaves. With ``verify`` (or the ``VERIFY`` flag) each pass's result is checked
    by ``ir.verify``, so a broken user pass is named at once.
    """
    pipeline = _with_user_passes(passes)
    unknown = set(disabled) - {p.__name__ for p in pipeline}
    if unknown:
        raise ValueError(f"unknown pass(es) {sorted(unknown)}; the pipeline has "
                         f"{[p.__name__ for p in pipeline]}")
    check = bool(config.flag("VERIFY")) if verify is None else verify
    context = PREDICTION if context is None else context
    records: list[PassRecord] = []
    for compiler_pass in pipeline:
        if compiler_pass.__name__ in disabled:
            continue
        before = graph
        graph, changes, notes = _run(compiler_pass, graph, context)
        records.append(PassRecord(compiler_pass.__name__, before, graph, changes, notes))
        if check:
            try:
                verify_graph(graph)
            except GraphError as err:
                raise GraphError(f"after pass {compiler_pass.__name__}: {err}") from None
    return graph, records


def _run(compiler_pass: Pass, graph: Graph, context: PassContext) -> PassResult:
    """``compiler_pass(graph, context)``, its result checked: a PassResult, or the pair
    ``(graph, changes)`` a user pass may return."""
    try:
        result = compiler_pass(graph, context)
    except TypeError as err:
        if err.__traceback__ is not None and err.__traceback__.tb_next is None:  # the call
            raise TypeError(f"pass {compiler_pass.__name__} must take (graph, context) -- "
                            f"the graph and a PassContext, which it may ignore: {err}") from None
        raise
    if not (isinstance(result, tuple) and len(result) in (2, 3)
            and isinstance(result[0], Graph)):
        raise TypeError(f"pass {compiler_pass.__name__} must return (Graph, list of "
                        f"changes), got {type(result).__name__}")
    return PassResult(*result)


def _with_user_passes(passes: Sequence[Any]) -> tuple[Pass, ...]:
    for extra in passes:
        if not callable(extra) or not getattr(extra, "__name__", "").isidentifier():
            raise TypeError(f"a pass must be a named function (graph, context) -> (Graph, "
                            f"changes), got {extra!r}")
    at = PIPELINE.index(fuse_elementwise)
    return (*PIPELINE[:at], *passes, *PIPELINE[at:])


__all__ = [
    "PIPELINE", "PREDICTION", "Derivation", "MemoryPlan", "Note", "PassContext", "PassRecord",
    "PassResult", "choose_convolutions", "derived_input", "derived_values",
    "eliminate_common_subexpressions", "eliminate_dead_code", "fold_batchnorm",
    "fold_constants", "fuse_elementwise", "lower_operators", "plan_memory",
    "pretranspose_weights", "run_pipeline",
]
