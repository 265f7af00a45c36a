"""``_fused``: a chain of elementwise operators run as one operator, in one buffer.

What this module teaches
------------------------
The compiler's ``fuse_elementwise`` pass (``graph/passes``) replaces a chain such as
``broadcast_add -> relu`` by one node of this operator. Its ``program`` attribute is the
chain as a small graph (a ``graph.ir.Graph``: ``inputs``, ``nodes``, ``outputs``); the
kernel runs the steps in order, each writing into the same buffer (each step's
``kernel_out``), so the chain costs one array instead of one per step. This is
*grouping*, not loop fusion as XLA or TorchInductor do it: every step is still its own
numpy call over the whole array; what is saved is the intermediate arrays.

The operator lives here, with the others, so that it is registered whenever the operators
are (``nd._fused`` and ``sym._fused`` exist like every internal ``_`` operator), whether
or not the pass was ever imported; it reads the sub-program through the attributes every
graph node has, so this layer does not import ``graph``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register
from hybridlab.walk import reverse_mode

FUSED = "_fused"


def run_fused(*arrays: np.ndarray, program: Any, out: np.ndarray | None = None
              ) -> np.ndarray:
    """Run a fused sub-program, every step writing into one buffer: ``out`` if given, else
    the fresh array the first step's kernel returns (the registry's kernel_out contract)."""
    env: dict[int, np.ndarray] = {id(n): a for n, a in zip(program.inputs, arrays)}
    buffer = out
    for node in program.nodes:
        if node.kind != "call":
            continue
        args = [env[id(v.node)] for v in node.inputs]
        if buffer is None:
            buffer = node.opdef.kernel(*args, **node.attr_dict)
        else:  # elementwise: each element is read before it is written
            node.opdef.kernel_out(*args, out=buffer, **node.attr_dict)
        env[id(node)] = buffer
    assert buffer is not None, "a fused program has at least one step"
    return buffer


def _infer_fused(*avals: Aval, program: Any) -> list[Aval]:
    """Each step's own shape rule, in order: the last step's aval is the group's."""
    env: dict[int, Aval] = {id(n): a for n, a in zip(program.inputs, avals)}
    for node in program.nodes:
        if node.kind == "call":
            env[id(node)] = node.opdef.infer(*[env[id(v.node)] for v in node.inputs],
                                             **node.attr_dict)[0]
    return [env[id(program.outputs[0].node)]]


def _kernel(*arrays: np.ndarray, program: Any) -> np.ndarray:
    return run_fused(*arrays, program=program)


def _kernel_out(*arrays: np.ndarray, out: np.ndarray, program: Any) -> np.ndarray:
    return run_fused(*arrays, program=program, out=out)


def _overwrites_safely(attrs: dict[str, Any]) -> bool:
    """The group may write over its first input only if no later step reads that input."""
    program: Any = attrs["program"]
    first = program.inputs[0]
    readers = [n for n in program.nodes if any(v.node is first for v in n.inputs)]
    steps = [n for n in program.nodes if n.kind == "call"]
    return readers == steps[:1]


def _fused_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
                program: Any) -> list[Any]:
    """Differentiate the sub-program: replay its steps with ``F`` (the intermediate values
    were never stored: recomputing them is what fusion trades for memory), then apply
    each step's own gradient rule from the last step back."""
    values = {id(p): x for p, x in zip(program.inputs, inputs)}
    steps = [n for n in program.nodes if n.kind == "call"]
    for step in steps[:-1]:
        args = [values[id(v.node)] for v in step.inputs]
        values[id(step)] = getattr(F, step.opdef.name)(*args, **step.attr_dict)
    values[id(steps[-1])] = outputs[0]

    def vjp(step: Any, found: list[Any]) -> Sequence[Any]:  # the step's own rule
        args = [values[id(v.node)] for v in step.inputs]
        rule: Any = step.opdef.grad
        return list(rule(F, args, [values[id(step)]], found, **step.attr_dict))

    grads: dict[int, Any] = {id(steps[-1]): out_grads[0]}
    reverse_mode(steps, grads, lambda step: [id(step)],
                 lambda step: [id(v.node) for v in step.inputs], vjp,
                 lambda key, previous, grad: previous + grad)
    return [grads.get(id(p)) for p in program.inputs]


register(OpDef(
    name=FUSED, kernel=_kernel, kernel_out=_kernel_out, infer=_infer_fused, grad=_fused_grad,
    kind=Kind.OPAQUE, inplace_ok=_overwrites_safely,
    inputs=("*data",), attrs={"program": Attr("any")},
    doc="A fused chain of elementwise ops (made by the fuse_elementwise pass).",
))
