"""The graph layer's half of ``_foreach`` (ops/control_flow.py): compile a loop's body,
and build the two bodies its gradient runs.

``ops`` sits below ``graph``, so the operator asks for these through
``control_flow.HOOKS``, which :func:`install` fills when this module is imported (by
``cached_op`` and ``evaluate``, which every compiled or interpreted program goes through).

The gradient of ``outs, states = foreach(body, data, states, free)`` is two more loops:

* *history*: the body again, also returning the states it was given, so the backward
  knows the state at every step (recomputed rather than kept by the forward);
* *backward*: per reversed step, the body's vector-Jacobian product (``autodiff``'s joint
  graph of the body, cut to its gradients): rows ``data[t], state_t, d_outs[t]``, carried
  ``d_states``, the same free inputs; it returns ``d_data[t]`` and ``d_free`` per step and
  the carried ``d_states`` of the step before.
"""

from __future__ import annotations

from typing import Any, Callable

from hybridlab.graph import autodiff, shapes
from hybridlab.graph.ir import Graph
from hybridlab.ops import control_flow
from hybridlab.ops.registry import Aval


def compile_body(body: Graph, avals: tuple[Aval, ...], training: bool
                 ) -> Callable[..., tuple[Any, ...]]:
    """The body typed by ``avals``, through the pass pipeline (lowering, fusion, the
    memory plan), as generated Python: called once per step by the loop."""
    from hybridlab.graph.codegen import compile_graph
    from hybridlab.graph.passes import PassContext, run_pipeline

    typed, _ = run_pipeline(shapes.infer_graph(body, avals), context=PassContext(training))
    program = compile_graph(typed, name="body")
    return lambda *arrays: program(*arrays, training=training)


def gradient_bodies(body: Graph, avals: tuple[Aval, ...], counts: tuple[int, int, int]
                    ) -> tuple[Graph, Graph]:
    """``(backward, history)`` for a loop over ``body`` (see the module docstring)."""
    num_data, num_states, num_outs = counts
    typed = shapes.infer_graph(body, avals)
    states = typed.inputs[num_data:num_data + num_states]
    outs = typed.outputs
    history = Graph.from_outputs([*outs[:num_outs], *(n.out() for n in states),
                                  *outs[num_outs:]], typed.inputs)
    joint = autodiff.gradient_graph(typed)
    inputs, cotangents = joint.inputs[:len(avals)], joint.inputs[len(avals):]
    grads = joint.outputs[len(outs):]  # one per input of the body
    free_at = num_data + num_states
    backward = Graph.from_outputs(
        [*grads[:num_data], *grads[free_at:], *grads[num_data:free_at]],
        [*inputs[:free_at], *cotangents, *inputs[free_at:]])
    return backward, history


def install() -> None:
    control_flow.HOOKS["infer"] = shapes.infer_body
    control_flow.HOOKS["compile"] = compile_body
    control_flow.HOOKS["vjp"] = gradient_bodies


install()
