"""Automatic differentiation on a tape (``mx.autograd``).

What this module teaches
------------------------
Inside ``with autograd.record():`` every operator that reads an array on the tape (one
marked with ``x.attach_grad()``, or computed from one) is remembered as a :class:`Node`:
the op, its attributes, its input and output arrays. ``y.backward()`` walks these nodes
from ``y`` back to the marked arrays in reverse topological order and applies each op's
gradient rule, the vector-Jacobian product ``op.grad(F, inputs, outputs, out_grads)``
from the registry. There is no second set of derivatives: the same rule builds the
symbolic backward graph of a hybridized block.

There is no global tape list: the graph is reachable from the outputs, because each
array's ``_ag`` field says where it came from:

``None``               not on the tape (a constant: no gradient flows into it)
``Leaf``               marked by ``attach_grad``: ``backward`` writes into ``leaf.grad``
``(node, index)``      output ``index`` of a recorded ``node``

For ``x.attach_grad(); with autograd.record(): y = (x * x).sum()`` the tape is::

    x (Leaf) ==> Node(broadcast_mul, inputs=(x, x)) --> t ==> Node(sum, inputs=(t,)) --> y

and ``y.backward()`` runs ``sum``'s rule (ones shaped like ``t``), then ``mul``'s rule,
which returns one gradient per input; both are ``x``'s, so they are added: ``2 * x``.
Ops without a gradient rule (samplers, ``argmax``) are not recorded: constants. Ops whose
gradient exists but has no rule (``OpDef.grad_missing``: the backward of ``dot``, seen
only when a gradient is differentiated again) are recorded, and a gradient reaching one
raises :class:`MissingGradientError` -- never a silent zero, as in ``graph.autodiff``.

Invariants
----------
* Gradients are summed per array, so an array used twice (``x * x``) gets both parts.
* ``grad_req='write'`` overwrites ``x.grad``, ``'add'`` adds to it (gradient
  accumulation over several backward calls), ``'null'`` leaves it alone.
* ``backward`` frees the nodes it walked (their saved arrays) unless
  ``retain_graph=True``; a backward from a freed head raises :class:`GraphReleasedError`,
  and a freed array inside a new graph is a constant of it (MXNet clears its history).
* The backward pass runs with recording paused, unless ``create_graph=True`` (then the
  gradients are on the tape themselves, for higher-order derivatives).
* The mode flags are per thread and live here, so ``ndarray`` reads them without a
  circular import; this module imports ``ndarray`` only inside ``backward``/``grad``.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Sequence

import numpy as np

from hybridlab.errors import GraphReleasedError, MissingGradientError, NotRecordedError
from hybridlab.walk import postorder, reverse_mode  # the walks shared with graph.ir

GRAD_REQS = ("write", "add", "null")
__all__ = ["GRAD_REQS", "Function", "NDArray",  # noqa: F822 -- NDArray: from __getattr__
           "backward", "get_symbol", "grad", "is_recording",
           "is_training", "mark_variables", "pause", "predict_mode", "record", "set_recording",
           "set_training", "train_mode"]  # NDArray: MXNet's autograd exports it too


def __getattr__(name: str) -> Any:
    if name == "NDArray":  # (imported on demand: ndarray imports this module)
        from hybridlab.ndarray import NDArray
        return NDArray
    raise AttributeError(f"module 'hybridlab.autograd' has no attribute {name!r}")


class _Mode(threading.local):
    recording = False  # class attributes: the defaults every new thread starts with
    training = False


_MODE = _Mode()


def is_recording() -> bool:
    """True inside ``autograd.record()`` (and not inside ``pause()``)."""
    return _MODE.recording


def is_training() -> bool:
    """True in train mode (``record()`` by default, ``train_mode()``): Dropout drops."""
    return _MODE.training


def set_recording(is_record: bool) -> bool:
    """Turn recording on or off; returns the previous state."""
    previous, _MODE.recording = _MODE.recording, bool(is_record)
    return previous


def set_training(train_mode: bool) -> bool:
    """Turn train mode on or off; returns the previous state."""
    previous, _MODE.training = _MODE.training, bool(train_mode)
    return previous


@contextlib.contextmanager
def _scope(recording: bool | None, training: bool | None) -> Iterator[None]:
    saved = (_MODE.recording, _MODE.training)
    if recording is not None:
        _MODE.recording = recording
    if training is not None:
        _MODE.training = training
    try:
        yield
    finally:
        _MODE.recording, _MODE.training = saved


def record(train_mode: bool = True) -> contextlib.AbstractContextManager[None]:
    """Record operators for ``backward`` (in train mode unless ``train_mode=False``)."""
    return _scope(True, train_mode)


def pause(train_mode: bool = False) -> contextlib.AbstractContextManager[None]:
    """Stop recording inside a ``record()`` block (e.g. to compute a metric)."""
    return _scope(False, train_mode)


def train_mode() -> contextlib.AbstractContextManager[None]:
    """Train-mode behaviour (Dropout active) without changing recording."""
    return _scope(None, True)


def predict_mode() -> contextlib.AbstractContextManager[None]:
    """Inference behaviour (Dropout is the identity) without changing recording."""
    return _scope(None, False)


class Leaf:
    """A variable marked by ``attach_grad``: where ``backward`` puts its gradient.
    ``fresh``: a backward wrote it since it was last cleared (MXNet's ``_fresh_grad``)."""

    __slots__ = ("grad", "grad_req", "fresh")

    def __init__(self, grad: Any, grad_req: str) -> None:
        self.grad, self.grad_req, self.fresh = grad, grad_req, False


class Node:
    """One recorded operator call; ``inputs``/``outputs`` become None once freed."""

    __slots__ = ("op", "attrs", "inputs", "outputs")

    def __init__(self, op: Any, attrs: dict[str, Any], inputs: tuple[Any, ...],
                 outputs: tuple[Any, ...]) -> None:
        self.op, self.attrs, self.inputs, self.outputs = op, attrs, inputs, outputs


def mark_variables(variables: Sequence[Any], gradients: Sequence[Any],
                   grad_reqs: str | Sequence[str] = "write") -> None:
    """Make each array a leaf whose gradient goes to the matching buffer (``attach_grad``)."""
    reqs = [grad_reqs] * len(variables) if isinstance(grad_reqs, str) else list(grad_reqs)
    for var, grad_buffer, req in zip(variables, gradients, reqs):
        if req not in GRAD_REQS:
            raise ValueError(f"grad_req must be one of {list(GRAD_REQS)}, got {req!r}")
        var._ag = Leaf(grad_buffer, req)


def record_op(op: Any, attrs: dict[str, Any], inputs: Sequence[Any], outputs: Sequence[Any]
              ) -> None:
    """Called by ``ndarray`` while recording: put the call on the tape if it touches it.

    Ops without a gradient rule (samplers, Dropout's mask, ``argmax``, ``one_hot``) are
    not recorded: their outputs are constants for autograd, so no gradient flows back.
    An op whose gradient exists but is not written (``grad_missing``) is recorded, so
    that a gradient reaching it can say so (see :func:`_check_rule`).
    """
    if op.grad is None and not getattr(op, "grad_missing", ""):  # a CachedOp has no field
        return
    for x in inputs:
        if x._ag is not None:
            node = Node(op, attrs, tuple(inputs), tuple(outputs))
            for index, out in enumerate(outputs):
                out._ag = (node, index)
            return


def _topological_order(heads: Sequence[Any]) -> list[Node]:
    """Nodes reachable from ``heads``, each after every node that produced its inputs."""
    def producers(node: Node) -> list[Node]:
        # an input whose graph a previous backward freed is a constant here, as in MXNet
        # (which cleared its history): no gradient flows into it
        return [x._ag[0] for x in node.inputs
                if isinstance(x._ag, tuple) and x._ag[0].inputs is not None]
    roots = [h._ag[0] for h in heads if isinstance(h._ag, tuple)]
    for node in roots:
        if node.inputs is None:
            raise GraphReleasedError(
                f"the graph through '{node.op.name}' was already freed by a previous backward; "
                f"pass retain_graph=True to the first backward() to run it twice")
    return postorder(roots, producers)


def _check_rule(op: Any) -> None:
    """A gradient reached an op that has a gradient but no rule written for it."""
    if getattr(op, "grad_missing", ""):
        raise MissingGradientError(
            f"cannot differentiate '{op.name}': {op.grad_missing} (a zero would be a "
            f"wrong gradient)")


def _check_heads(heads: Sequence[Any], head_grads: Sequence[Any]) -> None:
    if len(head_grads) != len(heads):
        raise ValueError(f"got {len(heads)} head(s) but {len(head_grads)} head gradient(s)")
    for head, head_grad in zip(heads, head_grads):
        if head_grad is not None and tuple(head_grad.shape) != tuple(head.shape):
            raise ValueError(f"a head gradient of shape {tuple(head_grad.shape)} was given "
                             f"for a head of shape {tuple(head.shape)}: the gradient flowing "
                             f"into y must have y's shape (e.g. nd.ones_like(y))")
        if head._ag is None:
            raise NotRecordedError(
                f"cannot differentiate an array of shape {head.shape} that no recorded "
                f"operation produced; call x.attach_grad() and compute it inside "
                f"`with autograd.record():`")


def _checked(array: Any, grad: Any, op_name: str) -> Any:
    if tuple(grad.shape) != tuple(array.shape):
        raise ValueError(f"gradient rule of '{op_name}' returned shape {grad.shape} for an "
                         f"input of shape {array.shape} (a bug in the operator's grad)")
    return grad


def _backpropagate(heads: list[Any], head_grads: list[Any], retain_graph: bool, create_graph: bool,
                   train_mode: bool) -> dict[int, Any]:
    """Run every gradient rule from ``heads`` back; returns ``{id(array): (array, grad)}``."""
    from hybridlab import ndarray as nd  # lazy: ndarray imports this module

    _check_heads(heads, head_grads)
    order = _topological_order(heads)
    arrays: dict[int, Any] = {}  # the arrays behind the keys of ``grads``

    def keys(values: Sequence[Any]) -> list[int]:
        arrays.update((id(x), x) for x in values)
        return [id(x) for x in values]

    def vjp(node: Node, found: list[Any]) -> list[Any]:
        """One node's gradient rule on arrays (zeros for outputs nothing reached)."""
        _check_rule(node.op)
        out_grads = [nd.from_numpy(np.zeros(out.shape, out.dtype)) if g is None else g
                     for out, g in zip(node.outputs, found)]
        in_grads = node.op.grad(nd, list(node.inputs), list(node.outputs), out_grads,
                                **node.attrs)
        return [_checked(x, g, node.op.name) if g is not None and x._ag is not None else None
                for x, g in zip(node.inputs, in_grads)]

    grads: dict[int, Any] = {}
    with _scope(create_graph, train_mode):
        for head, head_grad in zip(heads, head_grads):
            if head_grad is None:
                head_grad = nd.from_numpy(np.ones(head.shape, head.dtype), head._ctx)
            (key,) = keys([head])
            grads[key] = head_grad if key not in grads else grads[key] + head_grad
        reverse_mode(order, grads, lambda node: keys(node.outputs),
                     lambda node: keys(node.inputs), vjp, lambda key, a, b: a + b)
    if not retain_graph:
        for node in order:
            node.inputs = node.outputs = None  # type: ignore[assignment]  # (freed: see producers)
    return {key: (arrays[key], grad) for key, grad in grads.items()}


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def backward(heads: Any, head_grads: Any = None, retain_graph: bool = False,
             train_mode: bool = True) -> None:
    """Compute the gradients of ``heads`` into the ``.grad`` of every marked array."""
    from hybridlab import ndarray as nd  # lazy: ndarray imports this module

    heads = _as_list(heads)
    head_grads = [None] * len(heads) if head_grads is None else _as_list(head_grads)
    grads = _backpropagate(heads, head_grads, retain_graph, False, train_mode)
    targets, sources = [], []
    for array, grad in grads.values():
        leaf = array._ag
        if isinstance(leaf, Leaf) and leaf.grad_req != "null":
            leaf.fresh = True
            targets.append(leaf.grad)
            sources.append(grad if leaf.grad_req == "write" else leaf.grad + grad)
    nd._assign_all(targets, sources)  # one engine op stores every gradient


def grad(heads: Any, variables: Any, head_grads: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, train_mode: bool = True) -> Any:
    """Return the gradients of ``heads`` with respect to ``variables`` (no ``.grad`` written).

    The result is always a list, one gradient per variable, even for one NDArray: MXNet
    1.9.1 wraps a single variable in a list before it computes (whatever its docstring
    says), so ``autograd.grad(y, x)[0]`` is the gradient, not its first row.
    With ``create_graph=True`` the results are recorded too, so they can be differentiated
    again; the graph is then kept unless ``retain_graph=False``.
    """
    from hybridlab import ndarray as nd  # lazy: ndarray imports this module

    heads = _as_list(heads)
    variables = _as_list(variables)
    for var in variables:
        if var._ag is None:
            raise NotRecordedError(f"autograd.grad: a variable of shape {var.shape} is not on "
                                   f"the tape; call attach_grad() on it before record()")
    head_grads = [None] * len(heads) if head_grads is None else _as_list(head_grads)
    retain = create_graph if retain_graph is None else retain_graph
    grads = _backpropagate(heads, head_grads, retain, create_graph, train_mode)
    result = [grads[id(v)][1] if id(v) in grads else nd.from_numpy(np.zeros(v.shape, v.dtype))
              for v in variables]
    if create_graph:
        for variable, gradient in zip(variables, result):
            if gradient._ag is None:  # constant in the variables: record that (derivative 0)
                record_op(_CONSTANT, {}, [variable], [gradient])
    return result


class _ConstantRule:
    """A gradient that does not depend on its variable (``radians``' is ``g * pi / 180``),
    as the tape sees it under ``create_graph=True``: differentiated again, it gives zeros,
    as MXNet's, instead of "not recorded"."""

    name, grad_missing = "_constant_in_variable", ""

    def grad(self, F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any]
             ) -> list[Any]:
        return [F.zeros_like(x) for x in inputs]


_CONSTANT = _ConstantRule()


class Function:
    """MXNet's custom differentiable function: subclass it, write ``forward(*inputs)`` and
    ``backward(*output_grads)`` on NDArrays, call an instance like a function. The forward
    runs with recording paused; the call is recorded as one tape node whose gradient rule
    is your ``backward`` (which returns one gradient per input)."""

    def __init__(self) -> None:
        self.saved_tensors: tuple[Any, ...] = ()

    def save_for_backward(self, *arrays: Any) -> None:
        self.saved_tensors = arrays

    def forward(self, *inputs: Any) -> Any:
        raise NotImplementedError("write forward(self, *inputs) in your Function subclass")

    def backward(self, *output_grads: Any) -> Any:
        raise NotImplementedError("write backward(self, *output_grads) in your Function "
                                  "subclass: one gradient per input of forward")

    def __call__(self, *inputs: Any) -> Any:
        with pause():
            outputs = self.forward(*inputs)
        if is_recording():
            record_op(_FunctionRule(self), {}, inputs, _as_list(outputs))
        return outputs


class _FunctionRule:
    """A :class:`Function` as the tape sees an operator: a name and a gradient rule."""

    grad_missing = ""

    def __init__(self, function: Function) -> None:
        self.function, self.name = function, type(function).__name__

    def grad(self, F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any]
             ) -> list[Any]:
        return _as_list(self.function.backward(*out_grads))


# ``get_symbol`` needs the Symbol front end, a layer above this one: ``symbol`` installs
# its converter here when imported (as it installs itself in ``graph.frontend``).
_TAPE_TO_SYMBOL: list[Any] = []


def get_symbol(x: Any) -> Any:
    """The recorded computation of ``x`` as a Symbol (MXNet's ``autograd.get_symbol``):
    every array it started from that no recorded op made is a variable (``var0``, ...)."""
    if not _TAPE_TO_SYMBOL:
        raise RuntimeError("autograd.get_symbol needs hybridlab.symbol (import hybridlab)")
    if not isinstance(x._ag, tuple):
        raise NotRecordedError("autograd.get_symbol: the array was not computed by a "
                               "recorded operation; compute it inside autograd.record()")
    return _TAPE_TO_SYMBOL[0](x, _topological_order([x]))
