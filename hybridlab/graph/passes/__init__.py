"""The compiler passes and the one place that sequences them.

Every pass is a pure function ``Graph -> (Graph, changes)`` named by a verb; ``changes``
is a list of human-readable strings (empty when nothing changed). :data:`PIPELINE` is the
order they run in; :func:`run_pipeline` is the only sequencer. It keeps a
:class:`PassRecord` (before, after, changes) per pass so lessons can show what each pass
did, and, when asked (or when the ``VERIFY`` flag is set), runs ``ir.verify`` after
every pass so a broken invariant is blamed on the pass that broke it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from hybridlab import config
from hybridlab.errors import GraphError
from hybridlab.graph.ir import Graph
from hybridlab.graph.ir import verify as verify_graph
from hybridlab.graph.passes.eliminate_common_subexpressions import eliminate_common_subexpressions
from hybridlab.graph.passes.eliminate_dead_code import eliminate_dead_code
from hybridlab.graph.passes.fold_constants import fold_constants
from hybridlab.graph.passes.fuse_elementwise import fuse_elementwise
from hybridlab.graph.passes.lower_operators import lower_operators
from hybridlab.graph.passes.plan_memory import MemoryPlan, plan_memory

Pass = Callable[[Graph], "tuple[Graph, list[str]]"]

PIPELINE: tuple[Pass, ...] = (
    lower_operators,  # first: every later pass sees primitive operators only
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
                 passes: Sequence[Pass] = (), training: bool = False
                 ) -> tuple[Graph, list[PassRecord]]:
    """Run every pass of :data:`PIPELINE` not named in ``disabled``, in order.

    ``training`` is the mode the program will run in: lowering ``BatchNorm`` depends on it.

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
    records: list[PassRecord] = []
    for compiler_pass in pipeline:
        if compiler_pass.__name__ in disabled:
            continue
        before = graph
        result = (lower_operators(graph, training) if compiler_pass is lower_operators
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


def _with_user_passes(passes: Sequence[Pass]) -> tuple[Pass, ...]:
    for extra in passes:
        if not callable(extra) or not getattr(extra, "__name__", "").isidentifier():
            raise TypeError(f"a pass must be a named function Graph -> (Graph, changes), got "
                            f"{extra!r}")
    at = PIPELINE.index(fuse_elementwise)
    return (*PIPELINE[:at], *passes, *PIPELINE[at:])


__all__ = [
    "PIPELINE", "MemoryPlan", "PassRecord", "eliminate_common_subexpressions",
    "eliminate_dead_code", "fold_constants", "fuse_elementwise", "lower_operators", "plan_memory",
    "run_pipeline",
]
