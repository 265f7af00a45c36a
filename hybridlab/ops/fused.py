"""``_fused``: one node running a chain of elementwise ops in one buffer.

The ``fuse_elementwise`` pass (``hybridlab.graph.passes``) builds these nodes; the op is
registered here, with the others, so it exists whenever the operators do (``nd._fused`` and
``sym._fused`` are installed like any op; the leading underscore marks it internal: the
only way to get a ``program`` is from the pass).

The ``program`` attribute is the group as a sub-graph. The operators sit below the graph
layer, so nothing here imports it: the kernel, shape rule and gradient only read what a
program offers (the ``FusedProgram`` protocol below) -- its input nodes, its nodes in
order (each with ``kind``, ``inputs``, ``opdef`` and ``attr_dict``), and
``infer_output(avals)``, the shape rule the pass's program class supplies.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

FUSED = "_fused"


class FusedProgram(Protocol):
    """What ``_fused`` needs of its ``program`` attribute (the pass's sub-graph)."""

    @property
    def inputs(self) -> Sequence[Any]: ...

    @property
    def nodes(self) -> Sequence[Any]: ...

    def infer_output(self, avals: Sequence[Aval]) -> Aval: ...


def _steps(program: FusedProgram) -> list[Any]:
    return [n for n in program.nodes if n.kind == "call"]


def run_fused(*arrays: np.ndarray, program: FusedProgram, out: np.ndarray | None = None
              ) -> np.ndarray:
    """Run a fused sub-program, every step writing into one buffer: ``out`` if given, else
    the fresh array the first step's kernel returns (the registry's kernel_out contract)."""
    env: dict[int, np.ndarray] = {id(n): a for n, a in zip(program.inputs, arrays)}
    buffer = out
    for node in _steps(program):
        args = [env[id(v.node)] for v in node.inputs]
        if buffer is None:
            buffer = node.opdef.kernel(*args, **node.attr_dict)
        else:  # elementwise: each element is read before it is written
            node.opdef.kernel_out(*args, out=buffer, **node.attr_dict)
        env[id(node)] = buffer
    assert buffer is not None, "a fused program has at least two steps"
    return buffer


def _infer_fused(*avals: Aval, program: FusedProgram) -> list[Aval]:
    return [program.infer_output(avals)]


def _kernel(*arrays: np.ndarray, program: FusedProgram) -> np.ndarray:
    return run_fused(*arrays, program=program)


def _kernel_out(*arrays: np.ndarray, out: np.ndarray, program: FusedProgram) -> np.ndarray:
    return run_fused(*arrays, program=program, out=out)


def _overwrites_safely(attrs: dict[str, Any]) -> bool:
    """The group may write over its first input only if no later step reads that input."""
    program: FusedProgram = attrs["program"]
    first = program.inputs[0]
    readers = [n for n in program.nodes if any(v.node is first for v in n.inputs)]
    return readers == _steps(program)[:1]


def _fused_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
                program: FusedProgram) -> list[Any]:
    """Differentiate the sub-program: replay its steps with ``F`` (the intermediate values
    were never stored: recomputing them is what fusion trades for memory), then apply
    each step's own gradient rule from the last step back."""
    values = {id(p): x for p, x in zip(program.inputs, inputs)}
    steps = _steps(program)
    for step in steps[:-1]:
        args = [values[id(v.node)] for v in step.inputs]
        values[id(step)] = getattr(F, step.opdef.name)(*args, **step.attr_dict)
    values[id(steps[-1])] = outputs[0]
    grads: dict[int, Any] = {id(steps[-1]): out_grads[0]}
    for step in reversed(steps):
        if grads.get(id(step)) is None:
            continue
        args = [values[id(v.node)] for v in step.inputs]
        rule = step.opdef.grad
        for value, grad in zip(step.inputs, rule(F, args, [values[id(step)]], [grads[id(step)]],
                                                 **step.attr_dict)):
            if grad is not None:
                previous = grads.get(id(value.node))
                grads[id(value.node)] = grad if previous is None else previous + grad
    return [grads.get(id(p)) for p in program.inputs]


register(OpDef(
    name=FUSED, kernel=_kernel, kernel_out=_kernel_out, infer=_infer_fused, grad=_fused_grad,
    kind=Kind.OPAQUE, inplace_ok=_overwrites_safely,
    inputs=("*data",), attrs={"program": Attr("any")},
    doc="A fused chain of elementwise ops (internal: made by the fuse_elementwise pass).",
))
