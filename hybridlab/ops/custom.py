"""``Custom``: an operator written in Python (``mx.operator``) as one node of a graph.

``sym.Custom(data=x, op_type='MySigmoid')`` is a node like any other: its shapes, types,
input and output names come from the CustomOpProp registered under ``op_type`` (in
:data:`PROPS`, filled by ``@mx.operator.register``), and its kernel runs the CustomOp's
``forward`` on NDArrays; its gradient is the ``_backward_Custom`` node, which runs the
CustomOp's ``backward``. NDArrays live above this layer, so ``hybridlab.operator``
installs the runner in :data:`RUN`. (``nd.Custom`` runs the same Python code eagerly.)
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hybridlab.errors import AttributeValueError
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

PROPS: dict[str, Any] = {}  # op_type -> its CustomOpProp class
# RUN[0](op_type, inputs, backward, training): the CustomOp's forward on the inputs (numpy
# arrays) -> its outputs; with backward=(out_grads, outputs), its backward -> the inputs'
# gradients
RUN: list[Callable[[str, list[np.ndarray], Any, bool], list[np.ndarray]]] = []


def prop(op_type: str) -> Any:
    """A new CustomOpProp of ``op_type`` (MXNet makes one per node)."""
    if op_type not in PROPS:
        raise AttributeValueError(f"Custom: no operator registered as {op_type!r} "
                                  f"(registered: {sorted(PROPS)}); decorate its "
                                  f"CustomOpProp with @mx.operator.register({op_type!r})")
    return PROPS[op_type]()


def _infer(*avals: Aval, op_type: str) -> list[Aval]:
    described = prop(op_type)
    _, shapes, _ = described.infer_shape([list(a.shape) for a in avals])
    _, types, _ = described.infer_type([a.dtype for a in avals])
    return [Aval(tuple(s), np.dtype(t)) for s, t in zip(shapes, types)]


def _counts(op_type: str) -> tuple[int, int]:
    described = prop(op_type)
    return len(described.list_arguments()), len(described.list_outputs())


def _forward(*arrays: np.ndarray, rt: Any, op_type: str) -> Any:
    outputs = RUN[0](op_type, list(arrays), None, rt.training)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _backward(*arrays: np.ndarray, rt: Any, op_type: str) -> Any:
    count_in, count_out = _counts(op_type)
    out_grads, inputs = arrays[:count_out], arrays[count_out:count_out + count_in]
    grads = RUN[0](op_type, list(inputs), (list(out_grads), list(arrays[count_out + count_in:])),
                   rt.training)
    return grads[0] if len(grads) == 1 else tuple(grads)


def _grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], op_type: str
          ) -> list[Any]:
    grads = F._backward_Custom(*out_grads, *inputs, *outputs, op_type=op_type)
    return [grads[i] for i in range(len(inputs))] if len(inputs) > 1 else [grads]


register(OpDef(
    name="Custom", kernel=_forward, infer=_infer, grad=_grad, kind=Kind.OPAQUE, pure=False,
    needs_context=True,
    inputs=lambda attrs: tuple(prop(attrs["op_type"]).list_arguments()),
    num_outputs=lambda attrs: _counts(attrs["op_type"])[1], attrs={"op_type": Attr("str")},
    doc="The Python operator registered as ``op_type`` (mx.operator.CustomOp)."))
register(OpDef(
    name="_backward_Custom", kernel=_backward, grad=None, kind=Kind.OPAQUE, pure=False,
    needs_context=True,
    infer=lambda *avals, op_type: list(avals[_counts(op_type)[1]:][:_counts(op_type)[0]]),
    inputs=("*args",), num_outputs=lambda attrs: _counts(attrs["op_type"])[0],
    attrs={"op_type": Attr("str")}, grad_missing="a Python operator has no second order",
    doc="``Custom``'s gradient: the CustomOp's backward (out_grads, inputs, outputs)."))
