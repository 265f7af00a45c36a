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
from hybridlab.graph.passes.plan_memory import MemoryPlan, plan_memory

Pass = Callable[[Graph], "tuple[Graph, list[str]]"]

PIPELINE: tuple[Pass, ...] = (
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


def run_pipeline(graph: Graph, disabled: Sequence[str] = (), verify: bool | None = None
                 ) -> tuple[Graph, list[PassRecord]]:
    """Run every pass of :data:`PIPELINE` not named in ``disabled``, in order."""
    unknown = set(disabled) - {p.__name__ for p in PIPELINE}
    if unknown:
        raise ValueError(f"unknown pass(es) {sorted(unknown)}; the pipeline has "
                         f"{[p.__name__ for p in PIPELINE]}")
    check = bool(config.FLAGS["VERIFY"]) if verify is None else verify
    records: list[PassRecord] = []
    for compiler_pass in PIPELINE:
        if compiler_pass.__name__ in disabled:
            continue
        before = graph
        graph, changes = compiler_pass(graph)
        records.append(PassRecord(compiler_pass.__name__, before, graph, changes))
        if check:
            try:
                verify_graph(graph)
            except GraphError as err:
                raise GraphError(f"after pass {compiler_pass.__name__}: {err}") from None
    return graph, records


__all__ = [
    "PIPELINE", "MemoryPlan", "PassRecord", "eliminate_common_subexpressions",
    "eliminate_dead_code", "fold_constants", "fuse_elementwise", "plan_memory", "run_pipeline",
]
