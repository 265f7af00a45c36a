"""Symbolic gradients: the joint forward+backward graph against central differences,
against the imperative tape, and through CachedOp under ``autograd.record()``."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import has_ops, random_graphs, seed_mlp
from hypothesis import assume, given, settings

import hybridlab as mx
from hybridlab.errors import GraphError
from hybridlab.graph import autodiff, ir
from hybridlab.graph.cached_op import CachedOp
from hybridlab.graph.codegen import compile_graph
from hybridlab.graph.evaluate import evaluate
from hybridlab.graph.passes import run_pipeline

SMOOTH = ("tanh", "negative")  # no kinks: central differences are exact enough
SMOOTH_BINARY = ("broadcast_add", "broadcast_mul", "broadcast_sub")


def _loss_weights(graph: ir.Graph, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.aval.shape) for v in graph.outputs]


def _numeric_grads(graph: ir.Graph, arrays: list[np.ndarray], weights: list[np.ndarray],
                   eps: float = 1e-6) -> list[np.ndarray]:
    def loss(values: list[np.ndarray]) -> float:
        return sum(float((o * w).sum()) for o, w in zip(evaluate(graph, *values), weights))

    grads = []
    for i, array in enumerate(arrays):
        grad = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            plus, minus = [a.copy() for a in arrays], [a.copy() for a in arrays]
            plus[i][index] += eps
            minus[i][index] -= eps
            grad[index] = (loss(plus) - loss(minus)) / (2 * eps)
        grads.append(grad)
    return grads


@settings(max_examples=25, deadline=None)
@given(random_graphs(dtype="float64", unary=SMOOTH, binary=SMOOTH_BINARY))
def test_joint_graph_gradients_equal_central_differences(case):
    graph, arrays = case
    weights = _loss_weights(graph, 0)
    joint = autodiff.gradient_graph(graph)
    ir.verify(joint)
    optimised, _ = run_pipeline(joint, verify=True)
    results = compile_graph(optimised, static_alloc=True)(*arrays, *weights)
    symbolic = results[len(graph.outputs):]
    for got, want in zip(symbolic, _numeric_grads(graph, arrays, weights)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(random_graphs(dtype="float64", unary=SMOOTH, binary=SMOOTH_BINARY))
def test_split_programs_give_the_joint_results(case):
    graph, arrays = case
    weights = _loss_weights(graph, 1)
    joint = autodiff.gradient_graph(graph)
    split = autodiff.split_joint(joint, len(graph.inputs), len(graph.outputs))
    forward = evaluate(split.forward, *arrays)
    saved = [arrays[i] for i in split.saved_inputs]
    grads = evaluate(split.backward, *forward[len(graph.outputs):], *saved, *weights)
    expected = evaluate(joint, *arrays, *weights)
    for got, want in zip(forward[:len(graph.outputs)] + grads, expected):
        np.testing.assert_allclose(got, want)


def _imperative(graph: ir.Graph, inputs: list) -> list:
    """Replay ``graph`` op by op through ``mx.nd`` (the tape records each op)."""
    env = {id(n): x for n, x in zip(graph.inputs, inputs)}
    for node in graph.nodes:
        if node.kind == "const":
            env[id(node)] = mx.nd.array(node.value, dtype=node.value.dtype)
        elif node.kind == "call":
            function = getattr(mx.nd, node.op)
            env[id(node)] = function(*[env[id(v.node)] for v in node.inputs], **node.attr_dict)
    return [env[id(v.node)] for v in graph.outputs]


@settings(max_examples=20, deadline=None)
@given(random_graphs())
def test_cached_op_gradients_equal_the_imperative_tape(case):
    graph, arrays = case
    reached = ir.toposort(v.node for v in graph.outputs)
    assume(any(n.kind == "var" for n in reached))  # else the loss is not on the tape at all
    weights = [mx.nd.array(w, dtype="float32") for w in _loss_weights(graph, 2)]
    grads = []
    for run in (lambda xs: _imperative(graph, xs), lambda xs: CachedOp(graph)(*xs)):
        xs = [mx.nd.array(a, dtype="float32") for a in arrays]
        for x in xs:
            x.attach_grad()
        with mx.autograd.record():
            outs = run(xs)
            outs = outs if isinstance(outs, list) else [outs]
            terms = [(o * w).sum() for o, w in zip(outs, weights)]
            loss = terms[0]
            for term in terms[1:]:
                loss = loss + term
        loss.backward()
        grads.append([x.grad.asnumpy() for x in xs])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not has_ops("FullyConnected"), reason="FullyConnected not registered yet")
def test_the_seed_mlp_training_step_runs_as_planned_and_keeps_the_plans_invariants():
    """Forward + backward of the seed MLP, parameter gradients as outputs: the static
    program computes what the reference interpreter does, twice over the same arena, and
    the plan's numbers are consistent (targets are the benchmark's business:
    benchmarks/memory_plan.py)."""
    graph = seed_mlp(batch=8)
    joint = autodiff.gradient_graph(graph)
    step = ir.Graph(joint.nodes, joint.inputs, joint.outputs[:1] + joint.outputs[2:])
    optimised, _ = run_pipeline(step, verify=True)
    plan = optimised.meta["memory"]
    assert plan.bound <= plan.unplanned and plan.planned <= plan.unplanned
    assert plan.planned >= plan.bound
    assert plan.planned <= 1.1 * plan.bound  # bytes, deterministic: the plan target
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(n.aval[0].shape).astype(np.float32) for n in step.inputs]
    expected = evaluate(step, *arrays)
    program = compile_graph(optimised, static_alloc=True, name="step")
    for _ in range(2):
        for got, want in zip(program(*arrays), expected):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(random_graphs(dtype="float64"))
def test_fused_graphs_differentiate_like_the_original(case):
    """``_fused`` has a gradient rule (its steps' rules, replayed): never silent zeros."""
    graph, arrays = case
    fused, records = run_pipeline(graph, disabled=("plan_memory",))
    weights = _loss_weights(graph, 1)
    expected = evaluate(autodiff.gradient_graph(graph), *arrays, *weights)
    got = evaluate(autodiff.gradient_graph(fused), *arrays, *weights)
    for want, have in zip(expected, got):
        np.testing.assert_allclose(have, want, rtol=1e-9, atol=1e-12)


def test_a_fused_chain_gets_its_real_gradient():
    x = ir.var("x", ir.Aval((5,), np.dtype("float64")))
    chain = ir.call("tanh", [ir.call("_mul_scalar", [x.out()], {"scalar": 3.0}).out()])
    graph = ir.Graph.from_outputs([chain.out()])
    fused, _ = run_pipeline(graph, disabled=("plan_memory",))
    assert [n.op for n in fused.nodes if n.kind == "call"] == ["_fused"]
    values = np.linspace(-1, 1, 5)
    grad = evaluate(autodiff.gradient_graph(fused), values, np.ones(5))[1]
    np.testing.assert_allclose(grad, 3 * (1 - np.tanh(3 * values) ** 2))


def test_a_missing_gradient_rule_is_an_error_not_zeros():
    """dot's backward ops have no second order: differentiating through them says so."""
    f64 = np.dtype("float64")
    x, w = ir.var("x", ir.Aval((2, 3), f64)), ir.var("w", ir.Aval((3, 4), f64))
    graph = ir.Graph.from_outputs([ir.call("dot", [x.out(), w.out()], name="xw").out()])
    joint = autodiff.gradient_graph(graph)
    with pytest.raises(GraphError, match=r"_dot_grad_lhs.*no second order"):
        autodiff.gradient_graph(joint)
