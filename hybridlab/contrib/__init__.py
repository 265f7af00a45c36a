"""Control flow that a traced program can hold: ``F.contrib.cond``, ``foreach``, ``while_loop``.

What this module teaches
------------------------
A Python ``if`` on a Symbol cannot be traced: there is no value to test. The graph
needs control flow *as operators*. hybridlab builds them from operators that already
exist, one definition for ``nd`` and ``sym`` alike:

* ``cond(pred, then_func, else_func)``, traced, computes both branches and selects with
  ``where`` -- right for pure branches, and the price is computing both. Imperatively,
  as in MXNet's ``nd.contrib.cond``, ``nd`` reads a one-element ``pred`` and runs only
  the branch it selects (a ``pred`` with several elements selects elementwise, as the
  traced form does);
* ``foreach(body, data, init_states)`` runs ``body`` over the first axis of ``data``
  (an array, or a list of arrays read in step), unrolled: the length comes from the
  (traced) shape, so one program per length;
* ``while_loop(cond, func, loop_vars, max_iterations)`` is unrolled ``max_iterations``
  times when traced; a running mask freezes the loop variables once ``cond`` fails, and
  the stacked outputs of the finished steps are zeros (MXNet's padding). This one has a
  second, imperative form: ``nd`` can read ``cond``'s value, so it runs a Python loop
  that stops at once, and may omit ``max_iterations``.

As in MXNet, the stacked outputs come back as one array when the step returned one
array, and as a list when it returned a list (``None``: no outputs, ``[]``).

MXNet had dedicated subgraph operators for these; unrolling keeps every step visible
to the compiler's passes, at the cost of a program that grows with the trip count.
The functions are installed as ``nd.contrib.*`` and ``sym.contrib.*`` when this module
is imported (``import hybridlab`` does it).
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any, Callable

from hybridlab import ndarray, symbol
from hybridlab.base import _flatten, _regroup
from hybridlab.contrib import sampling
from hybridlab.errors import UnboundedLoopError, UnusedLoopInputError


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _step_list(value: Any) -> list:
    """A step's outputs as a list: ``None`` (no per-step output) is the empty list."""
    return [] if value is None else _as_list(value)


def _shaped_like(given: Any, stacked: list) -> Any:
    """MXNet's return convention: one array if the step gave one, else a list."""
    return stacked[0] if given is not None and not isinstance(given, (list, tuple)) else stacked


def _select(F: Any, mask: Any, new: Any, old: Any) -> Any:
    return F.where(F.broadcast_like(mask, new), new, old)


def cond(F: Any, pred: Any, then_func: Callable, else_func: Callable, name: str = "cond"
         ) -> Any:
    """``then_func()`` where ``pred`` is non-zero, else ``else_func()``: traced, both are
    computed; imperatively only the chosen one, when ``pred`` has one element."""
    if F is ndarray and getattr(pred, "size", 1) == 1:  # a value to read: a Python `if`
        return then_func() if bool(pred) else else_func()
    then_out, else_out = then_func(), else_func()
    chosen = [_select(F, pred, a, b) for a, b in zip(_as_list(then_out), _as_list(else_out))]
    return chosen if isinstance(then_out, (list, tuple)) else chosen[0]


def foreach(F: Any, body: Callable, data: Any, init_states: Any,
            name: str = "foreach") -> tuple[Any, Any]:
    """``outputs[i], states = body(data[i], states)`` for each i; outputs are stacked.

    ``data`` may be a list of arrays of equal length: ``body`` then gets a list of rows.
    Imperatively (``nd``) this is a Python loop; traced (``sym``), one ``_foreach`` node
    holding ``body`` as a graph (ops/control_flow.py), whatever the length.
    """
    if F is symbol:
        return _foreach_node(body, data, init_states, name)
    arrays = _as_list(data)
    first = arrays[0]
    length = first.shape[0] if F is ndarray else first._static_shape()[0]
    states, outputs, out = init_states, [], None
    for i in range(length):
        items = [F.squeeze(F.slice_axis(a, axis=0, begin=i, end=i + 1), axis=0) for a in arrays]
        out, states = body(items if isinstance(data, (list, tuple)) else items[0], states)
        outputs.append(_step_list(out))
    stacked = [F.stack(*column, axis=0) for column in zip(*outputs)]
    return _shaped_like(out, stacked), states


def _foreach_node(body: Callable, data: Any, init_states: Any, name: str) -> tuple[Any, Any]:
    """Trace ``body`` once on row and state variables, cut what it reads from outside
    into free inputs, and add one ``_foreach`` node (MXNet's ``_cut_subgraph``)."""
    datas = _as_list(data)
    states, nesting = _flatten(init_states)  # states may be nested lists, as in MXNet
    rows = [_step_var(f"{name}_data{i}", x, row=True) for i, x in enumerate(datas)]
    carried = [_step_var(f"{name}_state{i}", x, row=False) for i, x in enumerate(states)]
    outs, new_states = body(rows if isinstance(data, (list, tuple)) else rows[0],
                            _regroup(carried, nesting))
    out_list = _step_list(outs)
    values = [v for s in [*out_list, *_flatten(new_states)[0]] for v in s._outputs]
    step_nodes = [v._outputs[0].node for v in [*rows, *carried]]
    _check_used(values, step_nodes, len(rows), name)
    graph, free = _cut(values, step_nodes, name)
    node = symbol._foreach(  # type: ignore[attr-defined]  # (populate)
        *datas, *states, *[symbol.Symbol([v]) for v in free], body=graph,
        num_data=len(datas), num_states=len(states), num_out_data=len(out_list), name=name)
    results = [symbol.Symbol([v]) for v in node._outputs]
    stacked, final = results[:len(out_list)], results[len(out_list):]
    return _shaped_like(outs, stacked), _regroup(final, nesting)


def _check_used(values: list, step_nodes: list, num_data: int, name: str) -> None:
    """Every data array and state must reach the body's results (MXNet asserts it)."""
    from hybridlab.graph import ir

    reached = {id(node) for node in ir.toposort(v.node for v in values)}
    for i, node in enumerate(step_nodes):
        if id(node) not in reached:
            what = f"data {i}" if i < num_data else f"state {i - num_data}"
            raise UnusedLoopInputError(
                f"{name}: the body never reads its {what}; the loop operator gives every "
                f"data row and state to its body (MXNet refuses this too). Fix: use it in "
                f"the body, or leave it out of data/init_states")


def _step_var(name: str, outer: Any, row: bool) -> Any:
    """A body input standing for one row of ``outer`` (or for a state), shaped when
    ``outer``'s shape is known."""
    aval = outer._outputs[0].aval
    if aval is None or (row and not aval.shape):
        return symbol.var(name)
    return symbol.var(name, shape=aval.shape[1:] if row else aval.shape, dtype=aval.dtype)


def _cut(values: list, step_nodes: list, name: str) -> tuple[Any, list]:
    """The body graph computing ``values`` from the step variables; every value it reads
    that does not depend on them (a parameter, an outer expression) becomes a free input,
    listed in the order first read."""
    from hybridlab.graph import ir

    inner = {id(n) for n in step_nodes}
    for node in ir.toposort(v.node for v in values):
        if node.kind == "call" and any(id(v.node) in inner for v in node.inputs):
            inner.add(id(node))
    free: dict[tuple, Any] = {}
    copies: dict[int, Any] = {id(n): n for n in step_nodes}

    def mapped(value: Any) -> Any:
        if id(value.node) in inner:
            return copies[id(value.node)].out(value.index)
        key = (id(value.node), value.index)
        if key not in free:
            free[key] = (value, ir.var(f"{name}_free{len(free)}", value.aval))
        return free[key][1].out()

    for node in ir.toposort(v.node for v in values):
        if id(node) in inner and node.kind == "call":
            copies[id(node)] = dataclasses.replace(
                node, inputs=tuple(mapped(v) for v in node.inputs))
    outputs = [mapped(v) for v in values]
    inputs = [*step_nodes, *(var for _, var in free.values())]
    return ir.Graph.from_outputs(outputs, inputs), [value for value, _ in free.values()]


def while_loop(F: Any, cond: Callable, func: Callable, loop_vars: Any,
               max_iterations: int | None = None, name: str = "while_loop") -> tuple[Any, Any]:
    """Run ``outputs, loop_vars = func(*loop_vars)`` while ``cond(*loop_vars)``.

    Traced (``F = sym``), one ``_while_loop`` node holding ``cond`` and ``func`` as graphs
    (ops/control_flow.py); ``max_iterations`` is then required: it sizes the stacked
    outputs. Imperatively it is a Python loop, and ``max_iterations=None`` means "until
    ``cond`` fails". With a bound, the stacked outputs have ``max_iterations`` rows in both
    forms: the rows after the loop stopped are zeros -- except when ``cond`` fails before
    the first step: imperatively ``func`` never ran, so the outputs' shapes are unknown
    and the result has no outputs (``[]``), while the traced program gives zero rows.
    """
    if F is ndarray:
        return _run_while(cond, func, loop_vars, max_iterations)
    if max_iterations is None:
        raise UnboundedLoopError(
            "F.contrib.while_loop needs max_iterations when hybridized: the compiled "
            "program's outputs hold one row per step, so their size must be known when it "
            "is traced. Fix: max_iterations=<an upper bound on the number of steps>")
    variables = _as_list(loop_vars)
    steps = [_step_var(f"{name}_var{i}", v, row=False) for i, v in enumerate(variables)]
    step_nodes = [v._outputs[0].node for v in steps]
    test = cond(*steps)
    outs, new_vars = func(*steps)
    out_list = _step_list(outs)
    cond_graph, cond_free = _cut(list(test._outputs[:1]), step_nodes, f"{name}_cond")
    values = [v for s in [*out_list, *_as_list(new_vars)] for v in s._outputs]
    func_graph, func_free = _cut(values, step_nodes, f"{name}_func")
    node = symbol._while_loop(  # type: ignore[attr-defined]  # (populate)
        *variables, *[symbol.Symbol([v]) for v in [*cond_free, *func_free]],
        cond=cond_graph, func=func_graph, num_vars=len(variables),
        num_cond_free=len(cond_free), num_out_data=len(out_list),
        max_iterations=max_iterations, name=name)
    results = [symbol.Symbol([v]) for v in node._outputs]
    final = results[len(out_list):]
    return (_shaped_like(outs, results[:len(out_list)]),
            final if isinstance(loop_vars, (list, tuple)) else final[0])


def _run_while(cond: Callable, func: Callable, loop_vars: Any,
               max_iterations: int | None) -> tuple[Any, Any]:
    """The imperative loop: ``func`` runs only while ``cond`` holds (read at each step)."""
    variables, out = _as_list(loop_vars), None
    outputs: list[Any] = []
    while max_iterations is None or len(outputs) < max_iterations:
        if not cond(*variables):  # NDArray's bool reads its one value (a sync point)
            break
        out, new_vars = func(*variables)
        outputs.append(_step_list(out))
        variables = _as_list(new_vars)
    if outputs and max_iterations is not None:  # zero rows up to max_iterations
        outputs += [[ndarray.zeros_like(o) for o in outputs[0]]] * (max_iterations - len(outputs))
    return _finish_loop(ndarray, out, outputs, variables, loop_vars)


def _finish_loop(F: Any, out: Any, outputs: list, variables: list,
                 loop_vars: Any) -> tuple[Any, Any]:
    stacked = [F.stack(*column, axis=0) for column in zip(*outputs)]
    final = variables if isinstance(loop_vars, (list, tuple)) else variables[0]
    return _shaped_like(out, stacked), final


def install(module: Any) -> None:
    """Add ``module.contrib.cond/foreach/while_loop/rand_zipfian`` bound to ``module`` as ``F``."""
    if "contrib" not in vars(module):  # (hasattr would ask nd.__getattr__ for hints)
        module.contrib = types.SimpleNamespace()
    for function in (cond, foreach, while_loop, sampling.rand_zipfian):
        bound = functools.partial(function, module)
        functools.update_wrapper(bound, function)
        setattr(module.contrib, function.__name__, bound)


install(ndarray)
install(symbol)

# ``mx.contrib.autograd`` without importing it first, as MXNet's package offers it
from hybridlab.contrib import autograd  # noqa: E402
