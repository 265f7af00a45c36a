"""``_foreach``: a loop as ONE operator holding its body as a graph (MXNet's ``foreach``).

What this module teaches
------------------------
A Python ``for`` over a Symbol's rows cannot be traced without unrolling it: one copy of
the step per row, a program that grows with the length and is compiled again for every
new length. MXNet's answer, kept here, is an operator whose attribute is a *subgraph*:
``body`` (a ``graph.ir.Graph``) computes one step, and the node runs it once per row of
its data::

    inputs:  data... (T, ...)   states...   free...        (free: what the body reads
    body:    data[t]..., states..., free...  ->  outs_t..., new states...   from outside)
    outputs: outs... stacked (T, ...)        final states...

The body is compiled once per step signature (the rows' shapes, not ``T``), so a new
length costs the outer program's shape inference and memory plan, never a new body.
The kernel is a real Python loop calling the compiled body; codegen writes that loop
into the generated source. The gradient is a loop too: the body's vector-Jacobian
product, run over the reversed rows (the states at each step are recomputed first, as
fusion recomputes: memory traded for time).

This module sits in ``ops``, below ``graph``: compiling a body and differentiating one
need the graph layer, which installs them in :data:`HOOKS` when imported (the same
inversion as ``graph.frontend``); ``import hybridlab`` always does.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

from hybridlab.errors import GraphError, ShapeError
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

FOREACH = "_foreach"

# "infer": (body, step avals) -> the outputs' avals;
# "compile": (body, step avals, training) -> function of numpy arrays returning a tuple;
# "vjp": (body, step avals, counts) -> (backward body, history body): installed by graph
HOOKS: dict[str, Callable[..., Any]] = {}

# body -> {(mode, step avals): its compiled function}
_COMPILED: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()


def _hook(name: str) -> Callable[..., Any]:
    if name not in HOOKS:
        raise GraphError(f"_foreach needs hybridlab.graph to {name} its body; import "
                         f"hybridlab first")
    return HOOKS[name]


def step_avals(avals: tuple[Aval, ...], num_data: int) -> tuple[Aval, ...]:
    """The body's input avals: one row of each data input, then the states and free
    inputs as they are."""
    lengths = {a.shape[0] if a.shape else None for a in avals[:num_data]}
    if len(lengths) != 1 or None in lengths:
        shapes = [a.shape for a in avals[:num_data]]
        raise ShapeError(f"foreach: every data input is read row by row along its first "
                         f"axis, so all need one length; got shapes {shapes}")
    rows = tuple(Aval(tuple(a.shape[1:]), a.dtype) for a in avals[:num_data])
    return rows + tuple(avals[num_data:])


def infer_body(body: Any, avals: tuple[Aval, ...]) -> list[Aval]:
    """The body's outputs' avals for these input avals (graph/shapes.py infers graphs)."""
    return list(_hook("infer")(body, avals))


def _infer(*avals: Aval, body: Any, num_data: int, num_states: int, num_out_data: int
           ) -> list[Aval]:
    length = avals[0].shape[0] if avals and avals[0].shape else 0
    results = infer_body(body, step_avals(avals, num_data))
    states_in = avals[num_data:num_data + num_states]
    for i, (given, new) in enumerate(zip(states_in, results[num_out_data:])):
        if tuple(given.shape) != tuple(new.shape):
            raise ShapeError(f"foreach: the body returns state {i} with shape {new.shape}, "
                             f"but it came in with shape {given.shape}; a state keeps its "
                             f"shape from step to step")
    stacked = [Aval((length, *a.shape), a.dtype) for a in results[:num_out_data]]
    return stacked + list(results[num_out_data:])


def compiled_body(body: Any, avals: tuple[Aval, ...], training: bool
                  ) -> Callable[..., tuple[Any, ...]]:
    """The body as a function of numpy arrays, compiled once per step signature (and
    mode): a new length reuses it."""
    by_avals = _COMPILED.setdefault(body, {})
    key = (training, *((tuple(a.shape), np.dtype(a.dtype).str) for a in avals))
    if key not in by_avals:
        by_avals[key] = _hook("compile")(body, avals, training)
    return by_avals[key]  # type: ignore[no-any-return]


def run_foreach(step: Callable[..., tuple[Any, ...]], arrays: tuple[np.ndarray, ...], num_data: int,
                num_states: int, out_avals: list[Aval]) -> tuple[np.ndarray, ...]:
    """The loop: ``step`` on row ``t`` of every data array and the states so far."""
    data, states = arrays[:num_data], arrays[num_data:num_data + num_states]
    free = arrays[num_data + num_states:]
    rows: list[list[np.ndarray]] = [[] for _ in out_avals]
    for t in range(data[0].shape[0]):
        results = step(*[x[t] for x in data], *states, *free)
        for column, value in zip(rows, results):
            column.append(value)
        states = tuple(results[len(out_avals):])
    stacked = tuple(np.stack(column) if column else np.zeros((0, *a.shape), a.dtype)
                    for column, a in zip(rows, out_avals))
    return stacked + tuple(states)


def step_function(context: Any, body: Any, avals: tuple[Aval, ...]
                  ) -> Callable[..., tuple[Any, ...]]:
    """What generated code calls before its loop: the body compiled for the program's mode
    (``context.training``) and these step avals, from the cache."""
    return compiled_body(body, avals, context.training)


def stack_rows(rows: list[np.ndarray], aval: Aval) -> np.ndarray:
    """The per-step results as one array along a new first axis (no step: no rows)."""
    return np.stack(rows) if rows else np.zeros(aval.shape, aval.dtype)


def _kernel(*arrays: np.ndarray, rt: Any, body: Any, num_data: int, num_states: int,
            num_out_data: int) -> Any:
    avals = tuple(Aval(a.shape, a.dtype) for a in arrays)
    rows = step_avals(avals, num_data)
    outs = infer_body(body, rows)[:num_out_data]
    step = compiled_body(body, rows, rt.training)
    return _one_or_tuple(run_foreach(step, arrays, num_data, num_states, outs))


def _one_or_tuple(results: tuple[np.ndarray, ...]) -> Any:
    """A kernel returns one array when its op has one output (the registry's contract)."""
    return results[0] if len(results) == 1 else results


def _grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], body: Any,
          num_data: int, num_states: int, num_out_data: int) -> list[Any]:
    """The backward loop: (1) the state at every step, recomputed by a loop whose body
    also returns its input states; (2) the body's vector-Jacobian product over the
    reversed rows, carrying the states' gradients; (3) the rows' gradients reversed
    back, the free inputs' summed over the steps."""
    avals = tuple(_aval(x) for x in inputs)
    counts = (num_data, num_states, num_out_data)
    backward, history = _hook("vjp")(body, step_avals(avals, num_data), counts)
    data, states = inputs[:num_data], inputs[num_data:num_data + num_states]
    free = inputs[num_data + num_states:]
    seen = F._foreach(*data, *states, *free, body=history, num_data=num_data,
                      num_states=num_states, num_out_data=num_out_data + num_states)
    seen = list(seen)[num_out_data:num_out_data + num_states]  # the state at each step
    rows = [F.reverse(x, axis=0) for x in [*data, *seen, *out_grads[:num_out_data]]]
    carried = out_grads[num_out_data:]
    steps = list(F._foreach(*rows, *carried, *free, body=backward,
                            num_data=len(rows), num_states=num_states,
                            num_out_data=num_data + len(free)))
    data_grads = [F.reverse(g, axis=0) for g in steps[:num_data]]
    free_grads = [F.sum(g, axis=0) for g in steps[num_data:num_data + len(free)]]
    return data_grads + steps[num_data + len(free):] + free_grads


def _aval(x: Any) -> Aval:
    """The aval of a gradient rule's input: an NDArray's, or a graph value's (a Symbol)."""
    outputs = getattr(x, "_outputs", None)
    if outputs is None:  # an NDArray, or ops.eager's Tensor (its numpy array in .data)
        array = x if hasattr(x, "shape") else x.data
        return Aval(tuple(array.shape), np.dtype(array.dtype))
    aval = outputs[0].aval
    if aval is None:
        raise ShapeError("foreach: its gradient needs the shapes of its inputs; give the "
                         "data's shape (bind with arrays, or sym.var(shape=...))")
    return aval  # type: ignore[no-any-return]


register(OpDef(
    name=FOREACH, kernel=_kernel, infer=_infer, grad=_grad, kind=Kind.OPAQUE, needs_context=True,
    inputs=("*data",), num_outputs=lambda attrs: attrs["num_out_data"] + attrs["num_states"],
    attrs={"body": Attr("any"), "num_data": Attr("int", 1, low=1),
           "num_states": Attr("int", 0, low=0), "num_out_data": Attr("int", 0, low=0)},
    doc="A loop over the first axis of the data inputs, its step the graph ``body`` "
        "(MXNet's foreach; built by ``sym.contrib.foreach``)."))


# ---------------------------------------------------------------------------------------
# while_loop: the same idea with two subgraphs, ``cond`` and ``func``
# ---------------------------------------------------------------------------------------

WHILE_LOOP = "_while_loop"


def _while_parts(avals: tuple[Any, ...], num_vars: int, num_cond_free: int
                 ) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The inputs of ``cond`` (loop variables, its free inputs) and of ``func`` (loop
    variables, its free inputs), from the node's ``vars, cond free, func free``."""
    loop_vars = avals[:num_vars]
    return (loop_vars + avals[num_vars:num_vars + num_cond_free],
            loop_vars + avals[num_vars + num_cond_free:])


def _infer_while(*avals: Aval, cond: Any, func: Any, num_vars: int, num_cond_free: int,
                 num_out_data: int, max_iterations: int) -> list[Aval]:
    _, func_in = _while_parts(avals, num_vars, num_cond_free)
    results = infer_body(func, func_in)
    for i, (given, new) in enumerate(zip(avals[:num_vars], results[num_out_data:])):
        if tuple(given.shape) != tuple(new.shape):
            raise ShapeError(f"while_loop: func returns loop variable {i} with shape "
                             f"{new.shape}, but it came in with shape {given.shape}")
    stacked = [Aval((max_iterations, *a.shape), a.dtype) for a in results[:num_out_data]]
    return stacked + list(avals[:num_vars])


def _while_kernel(*arrays: np.ndarray, rt: Any, cond: Any, func: Any, num_vars: int,
                  num_cond_free: int, num_out_data: int, max_iterations: int) -> Any:
    """Run ``func`` while ``cond`` holds, at most ``max_iterations`` times; the per-step
    outputs are padded with zero rows up to ``max_iterations`` (MXNet's layout)."""
    avals = tuple(Aval(a.shape, a.dtype) for a in arrays)
    cond_in, func_in = _while_parts(avals, num_vars, num_cond_free)
    test = compiled_body(cond, cond_in, rt.training)
    step = compiled_body(func, func_in, rt.training)
    outs = _infer_while(*avals, cond=cond, func=func, num_vars=num_vars,
                        num_cond_free=num_cond_free, num_out_data=num_out_data,
                        max_iterations=max_iterations)[:num_out_data]
    cond_free, func_free = _while_parts(arrays, num_vars, num_cond_free)
    variables, rows = arrays[:num_vars], [[] for _ in outs]  # type: ignore[var-annotated]
    for _ in range(max_iterations):
        if not np.asarray(test(*variables, *cond_free[num_vars:])[0]).any():
            break
        results = step(*variables, *func_free[num_vars:])
        for column, value in zip(rows, results):
            column.append(value)
        variables = tuple(results[num_out_data:])
    padded = [np.concatenate([np.stack(column), np.zeros((max_iterations - len(column),
                                                          *a.shape[1:]), a.dtype)])
              if column else np.zeros(a.shape, a.dtype) for column, a in zip(rows, outs)]
    return _one_or_tuple((*padded, *variables))


register(OpDef(
    name=WHILE_LOOP, kernel=_while_kernel, infer=_infer_while, grad=None,
    grad_missing="a while_loop's gradient is not written: its trip count is decided by "
                 "the data. Fix: F.contrib.foreach when the length is the data's, or "
                 "hybridize(False) (the imperative loop records every step)",
    kind=Kind.OPAQUE, needs_context=True, inputs=("*data",),
    num_outputs=lambda attrs: attrs["num_out_data"] + attrs["num_vars"],
    attrs={"cond": Attr("any"), "func": Attr("any"), "num_vars": Attr("int", 1, low=1),
           "num_cond_free": Attr("int", 0, low=0), "num_out_data": Attr("int", 0, low=0),
           "max_iterations": Attr("int", 1, low=0)},
    doc="Runs the graph ``func`` while the graph ``cond`` holds, at most "
        "``max_iterations`` times (MXNet's while_loop; built by sym.contrib.while_loop)."))
