"""MXNet's ``mx.operator``: an operator written in Python, run by ``nd.Custom``.

What this module teaches
------------------------
A framework cannot ship every operator, so MXNet lets a program write one in Python:
a :class:`CustomOp` says how to compute (``forward``) and differentiate (``backward``)
on NDArrays, and a :class:`CustomOpProp` describes it (argument and output names,
``infer_shape``, ``infer_type``) and makes it (``create_operator``). ``@register(name)``
files the description under a name, and ``nd.Custom(x, op_type=name)`` runs it::

    class Square(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0] * in_data[0])
        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            self.assign(in_grad[0], req[0], 2 * in_data[0] * out_grad[0])

Under ``autograd.record()`` the call is one node of the tape whose gradient rule is the
operator's ``backward`` (an :class:`autograd.Function`). Its Python code and the ops it
pushes show in the profiler's ``Custom Operator`` domain (``Square::pure_python``,
``Square::_mul``), as MXNet's profiler shows them.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from hybridlab import autograd, engine, ndarray, profiler
from hybridlab.context import current_context
from hybridlab.ops import custom

_PROPS = custom.PROPS  # op_type -> its CustomOpProp class (sym.Custom reads it there)


class CustomOp:
    """The computation: override ``forward`` and ``backward`` (NDArrays in and out)."""

    def forward(self, is_train: bool, req: Sequence[str], in_data: list[Any],
                out_data: list[Any], aux: list[Any]) -> None:
        raise NotImplementedError("write forward(self, is_train, req, in_data, out_data, "
                                  "aux) in your CustomOp, filling out_data with self.assign")

    def backward(self, req: Sequence[str], out_grad: list[Any], in_data: list[Any],
                 out_data: list[Any], in_grad: list[Any], aux: list[Any]) -> None:
        raise NotImplementedError("write backward(self, req, out_grad, in_data, out_data, "
                                  "in_grad, aux) in your CustomOp, filling in_grad")

    def assign(self, dst: Any, req: str, src: Any) -> None:
        """Put ``src`` into ``dst`` as ``req`` says: 'write'/'inplace', 'add' or 'null'."""
        if req in ("write", "inplace"):
            dst[:] = src
        elif req == "add":
            dst[:] = dst + src
        elif req != "null":
            raise ValueError(f"CustomOp.assign: req must be 'write', 'inplace', 'add' or "
                             f"'null', got {req!r}")


class CustomOpProp:
    """The description: names, shapes and types of the operator, and its factory."""

    def __init__(self, need_top_grad: bool = True) -> None:
        self.need_top_grad_ = need_top_grad

    def list_arguments(self) -> list[str]:
        return ["data"]

    def list_outputs(self) -> list[str]:
        return ["output"]

    def list_auxiliary_states(self) -> list[str]:
        return []

    def infer_shape(self, in_shape: list[Any]) -> tuple[Any, Any, Any]:
        """``(input shapes, output shapes, aux shapes)``; by default every output has
        the first input's shape."""
        return (in_shape, [in_shape[0]] * len(self.list_outputs()),
                [in_shape[0]] * len(self.list_auxiliary_states()))

    def infer_type(self, in_type: list[Any]) -> tuple[Any, Any, Any]:
        """``(input types, output types, aux types)``; by default the first input's."""
        return (in_type, [in_type[0]] * len(self.list_outputs()),
                [in_type[0]] * len(self.list_auxiliary_states()))

    def declare_backward_dependency(self, out_grad: list[int], in_data: list[int],
                                    out_data: list[int]) -> list[int]:
        return [*(out_grad if self.need_top_grad_ else []), *in_data, *out_data]

    def create_operator(self, ctx: Any, in_shapes: list[Any], in_dtypes: list[Any]
                        ) -> CustomOp:
        raise NotImplementedError("write create_operator(self, ctx, in_shapes, in_dtypes) "
                                  "in your CustomOpProp, returning your CustomOp")


def register(reg_name: str) -> Callable[[type[CustomOpProp]], type[CustomOpProp]]:
    """``@mx.operator.register('name')`` on a CustomOpProp subclass: ``op_type='name'``."""
    def do_register(prop: type[CustomOpProp]) -> type[CustomOpProp]:
        if not (isinstance(prop, type) and issubclass(prop, CustomOpProp)):
            raise TypeError(f"mx.operator.register({reg_name!r}) decorates a subclass of "
                            f"mx.operator.CustomOpProp, got {prop!r}")
        _PROPS[reg_name] = prop
        return prop
    return do_register


def Custom(*data: Any, op_type: str, **kwargs: Any) -> Any:  # noqa: N802 -- MXNet's name
    """Run the operator registered as ``op_type`` on ``data`` (``kwargs`` go to its
    CustomOpProp as strings, as MXNet passes them); one NDArray or a list of them."""
    if op_type not in _PROPS:
        raise ValueError(f"nd.Custom: no operator registered as {op_type!r} (registered: "
                         f"{sorted(_PROPS)}); decorate its CustomOpProp with "
                         f"@mx.operator.register({op_type!r})")
    given: dict[str, Any] = {key: str(value) for key, value in kwargs.items()}
    prop = _PROPS[op_type](**given)
    if len(data) != len(prop.list_arguments()):
        raise TypeError(f"nd.Custom({op_type!r}) takes {len(prop.list_arguments())} input(s) "
                        f"{prop.list_arguments()}, got {len(data)}")
    in_shapes = [list(x.shape) for x in data]
    _, out_shapes, _ = prop.infer_shape(in_shapes)
    _, out_types, _ = prop.infer_type([x.dtype for x in data])
    operator = prop.create_operator(data[0].context, in_shapes, [x.dtype for x in data])
    run = _Run(operator, op_type, [(tuple(s), np.dtype(t)) for s, t in zip(out_shapes, out_types)])
    outputs = run(*data)
    return outputs[0] if len(outputs) == 1 else outputs


class _Run(autograd.Function):
    """One call of a custom operator, as the tape sees it."""

    def __init__(self, operator: CustomOp, op_type: str, outs: list[tuple[Any, Any]]) -> None:
        super().__init__()
        self.operator, self.op_type, self.outs = operator, op_type, outs
        self.training = autograd.is_training()

    def forward(self, *inputs: Any) -> list[Any]:
        ctx = inputs[0].context
        outputs = [ndarray.zeros(shape, ctx=ctx, dtype=dtype) for shape, dtype in self.outs]
        with profiler.custom_operator(self.op_type):
            self.operator.forward(self.training, ["write"] * len(outputs), list(inputs),
                                  outputs, [])
        self.save_for_backward(inputs, outputs)
        return outputs

    def backward(self, *out_grads: Any) -> list[Any]:
        inputs, outputs = self.saved_tensors
        grads = [ndarray.zeros_like(x) for x in inputs]
        with profiler.custom_operator(f"_backward_{self.op_type}"):
            self.operator.backward(["write"] * len(grads), list(out_grads), list(inputs),
                                   list(outputs), grads, [])
        return grads


def _run_in_graph(op_type: str, inputs: list[np.ndarray], backward: Any, training: bool
                  ) -> list[np.ndarray]:
    """A ``Custom`` node's kernel (ops/custom.py): the CustomOp's code on NDArrays."""
    with engine.own_engine():  # inside an engine task: NOTE [Custom op names]
        return _run(custom.prop(op_type), op_type, inputs, backward, training)


def _run(prop: CustomOpProp, op_type: str, inputs: list[np.ndarray], backward: Any,
         training: bool) -> list[np.ndarray]:
    arrays = [ndarray.array(x, dtype=x.dtype) for x in inputs]
    operator = prop.create_operator(current_context(), [list(x.shape) for x in inputs],
                                    [x.dtype for x in inputs])
    if backward is None:
        _, shapes, _ = prop.infer_shape([list(x.shape) for x in inputs])
        _, types, _ = prop.infer_type([x.dtype for x in inputs])
        outputs = [ndarray.zeros(tuple(s), dtype=t) for s, t in zip(shapes, types)]
        with profiler.custom_operator(op_type):
            operator.forward(training, ["write"] * len(outputs), arrays, outputs, [])
        return [out.asnumpy() for out in outputs]
    out_grads, results = ([ndarray.array(x, dtype=x.dtype) for x in part] for part in backward)
    grads = [ndarray.zeros(x.shape, dtype=x.dtype) for x in inputs]
    with profiler.custom_operator(f"_backward_{op_type}"):
        operator.backward(["write"] * len(grads), out_grads, arrays, results, grads, [])
    return [grad.asnumpy() for grad in grads]


custom.RUN[:] = [_run_in_graph]
ndarray.Custom = Custom  # type: ignore[attr-defined]  # mx.nd.Custom: the tape's own node
