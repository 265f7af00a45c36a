"""Control flow that a traced program can hold: ``F.contrib.cond``, ``foreach``, ``while_loop``.

What this module teaches
------------------------
A Python ``if`` on a Symbol cannot be traced: there is no value to test. The graph
needs control flow *as operators*. hybridlab builds them from operators that already
exist, one definition for ``nd`` and ``sym`` alike:

* ``cond(pred, then_func, else_func)`` computes both branches and selects with
  ``where`` -- right for pure branches, and the price is computing both;
* ``foreach(body, data, init_states)`` runs ``body`` over the first axis of ``data``,
  unrolled: the length comes from the (traced) shape, so one program per length;
* ``while_loop(cond, func, loop_vars, max_iterations)`` is unrolled ``max_iterations``
  times; a running mask freezes the loop variables once ``cond`` fails, and the
  stacked outputs of the finished steps are zeros (MXNet's padding).

MXNet had dedicated subgraph operators for these; unrolling keeps every step visible
to the compiler's passes, at the cost of a program that grows with the trip count.
The functions are installed as ``nd.contrib.*`` and ``sym.contrib.*`` when this module
is imported (``import hybridlab`` does it).
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable

from hybridlab import ndarray, symbol


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _length(F: Any, data: Any) -> int:
    return data.shape[0] if F is ndarray else data._static_shape()[0]


def _select(F: Any, mask: Any, new: Any, old: Any) -> Any:
    return F.where(F.broadcast_like(mask, new), new, old)


def cond(F: Any, pred: Any, then_func: Callable, else_func: Callable) -> Any:
    """``then_func()`` where ``pred`` is non-zero, else ``else_func()`` (both are computed)."""
    then_out, else_out = then_func(), else_func()
    chosen = [_select(F, pred, a, b) for a, b in zip(_as_list(then_out), _as_list(else_out))]
    return chosen if isinstance(then_out, (list, tuple)) else chosen[0]


def foreach(F: Any, body: Callable, data: Any, init_states: Any) -> tuple[Any, Any]:
    """``outputs[i], states = body(data[i], states)`` for each i; outputs are stacked."""
    states, outputs = init_states, []
    for i in range(_length(F, data)):
        item = F.squeeze(F.slice_axis(data, axis=0, begin=i, end=i + 1), axis=0)
        out, states = body(item, states)
        outputs.append(_as_list(out))
    stacked = [F.stack(*column, axis=0) for column in zip(*outputs)]
    return (stacked if len(stacked) > 1 else stacked[0]), states


def while_loop(F: Any, cond: Callable, func: Callable, loop_vars: Any,
               max_iterations: int) -> tuple[Any, Any]:
    """Run ``outputs, loop_vars = func(*loop_vars)`` while ``cond(*loop_vars)``, unrolled."""
    variables, outputs, active = _as_list(loop_vars), [], None
    for _ in range(max_iterations):
        test = cond(*variables)
        active = test if active is None else active * test  # once off, stays off
        step_out, new_vars = func(*variables)
        outputs.append([_select(F, active, o, F.zeros_like(o)) for o in _as_list(step_out)])
        variables = [_select(F, active, new, old)
                     for new, old in zip(_as_list(new_vars), variables)]
    stacked = [F.stack(*column, axis=0) for column in zip(*outputs)]
    final = variables if isinstance(loop_vars, (list, tuple)) else variables[0]
    return (stacked if len(stacked) > 1 else stacked[0]), final


def install(module: Any) -> None:
    """Add ``module.contrib.cond/foreach/while_loop`` bound to ``module`` as ``F``."""
    if not hasattr(module, "contrib"):
        module.contrib = types.SimpleNamespace()
    for function in (cond, foreach, while_loop):
        bound = functools.partial(function, module)
        functools.update_wrapper(bound, function)
        setattr(module.contrib, function.__name__, bound)


install(ndarray)
install(symbol)
