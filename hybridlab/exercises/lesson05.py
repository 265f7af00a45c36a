"""Exercise checks for lesson 05 (passes and the memory planner)."""

from __future__ import annotations

from typing import Any, Callable

from hybridlab.exercises._common import Feedback


def _program() -> Any:
    """relu((sin(x) + sin(x)) * (cos(x) + cos(x)) * 1.0 + 2.0): the exercise program."""
    from hybridlab import sym

    x = sym.var("x")
    return sym.relu((sym.sin(x) + sym.sin(x)) * (sym.cos(x) + sym.cos(x)) * 1.0 + 2.0)  # type: ignore[attr-defined]


def check_cse_count(answer: int) -> Feedback:
    """How many operator calls does common-subexpression elimination remove from it?"""
    from hybridlab.lab.passes import PassModel

    model = PassModel(_program(), shape={"x": (4,)})
    calls = [sum(1 for n in s.graph.nodes if n.kind == "call") for s in model.stages]
    names = [s.name for s in model.stages]
    at = names.index("eliminate_common_subexpressions")
    expected = calls[at - 1] - calls[at]
    if answer == expected:
        return Feedback(True, f"{expected}: the second sin(x) and the second cos(x)")
    return Feedback(False, f"{answer} is not it: look for calls with the same operator on the "
                           "same inputs; each repeat is computed once")


def check_times_one_pass(user_pass: Callable[[Any, Any], Any]) -> Feedback:
    """``user_pass(graph, context) -> (graph, changes)`` must remove every ``x * 1`` and keep the
    program's results."""
    import numpy as np

    from hybridlab.graph.evaluate import evaluate
    from hybridlab.lab.graphs import as_graph
    from hybridlab.lab.passes import PassModel

    symbol = _program()
    try:
        model = PassModel(symbol, passes=[user_pass], shape={"x": (4,)})
    except Exception as exc:  # the student's pass: explain, do not raise
        return Feedback(False, f"the pipeline with your pass raised {type(exc).__name__}: {exc}")
    stage = next(s for s in model.stages if s.name == getattr(user_pass, "__name__", ""))
    left = [n for n in stage.graph.nodes if n.kind == "call" and n.op == "_mul_scalar"
            and dict(n.attrs).get("scalar") == 1.0]
    if left:
        return Feedback(False, f"{len(left)} multiplication(s) by 1 are still there after "
                               "your pass")
    if not stage.changes:
        return Feedback(False, "your pass changed the graph but reported no change: return "
                               "a list saying what it did")
    x = np.linspace(-1, 1, 4).astype(np.float32)
    graph, _ = as_graph(symbol, {"x": (4,)})
    if not np.allclose(evaluate(graph, x)[0], evaluate(model.stages[-1].graph, x)[0]):
        return Feedback(False, "the optimised program computes something else: a pass must "
                               "keep the results")
    return Feedback(True, f"removed: {stage.changes}")


def check_biggest_stage(answer: str) -> Feedback:
    """Which pass removes the most operator calls from the exercise program?"""
    from hybridlab.lab.passes import PassModel

    model = PassModel(_program(), shape={"x": (4,)})
    calls = [sum(1 for n in s.graph.nodes if n.kind == "call") for s in model.stages]
    drops = {model.stages[i + 1].name: calls[i] - calls[i + 1] for i in range(len(calls) - 1)}
    best = max(drops, key=lambda name: drops[name])
    if answer == best:
        return Feedback(True, f"{best}: {drops[best]} fewer calls ({drops})")
    if answer not in drops:
        return Feedback(False, f"{answer!r} is not a stage; the stages are {list(drops)}")
    return Feedback(False, f"{answer} removes {drops[answer]} call(s); another pass removes "
                           "more -- count the calls at each stage in the explorer")


def _mlp_bound(batch: int) -> tuple[int, int]:
    """(liveness bound, unplanned bytes) of section 3's MLP forward at ``batch`` rows."""
    from hybridlab import nd
    from hybridlab.gluon import nn
    from hybridlab.lab.memory import timeline

    net = nn.HybridSequential()
    net.add(nn.Dense(256, activation="relu"), nn.Dense(128, activation="relu"), nn.Dense(10))  # type: ignore[misc]
    net.initialize()
    net.hybridize()
    net(nd.ones((batch, 512)))
    plan = timeline(net)[1]
    return plan.bound, plan.unplanned


def check_liveness_bound(prediction: int, batch: int = 32) -> Feedback:
    """Predict-then-measure: the liveness bound in bytes (the most bytes of results alive
    at one step) of section 3's MLP, ``Dense(256, relu) -> Dense(128, relu) -> Dense(10)``
    on 512 inputs, at ``batch`` rows; the plan is computed and compared."""
    bound, unplanned = _mlp_bound(batch)
    if prediction == bound:
        return Feedback(True, f"{bound} bytes: the first layer's {batch}x256 activations are "
                              f"still alive while the second layer writes its {batch}x128")
    off = prediction - bound
    line = (f"you predicted {prediction} bytes; the plan's bound is {bound} "
            f"({abs(off)} bytes, {abs(off) / bound:.0%} {'too many' if off > 0 else 'too few'})")
    if prediction == unplanned:
        why = "that is every result in a buffer of its own (unplanned); most die early"
    elif prediction == batch * 512 * 4:
        why = ("that is the input's bytes; the bound counts the program's results, and the "
               "input is not one")
    elif prediction * 4 == bound:
        why = "count bytes, not numbers: a float32 takes 4"
    elif prediction == _mlp_bound(64)[0]:
        why = f"that is the bound at batch 64; this asks for batch {batch}"
    elif off < 0:
        why = ("a product cannot write over the input it is still reading: its input and its "
               "output are alive at the same step")
    else:
        why = ("a result computed in place (relu over its input) shares its input's bytes, "
               "and the final output is small: find the one step where the most is alive")
    return Feedback(False, f"{line}: {why}")
