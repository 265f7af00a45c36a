"""Exercise checks for lesson 11 (hybrid modes elsewhere: TorchScript, torch.compile, jax.jit).

JAX is imported when a check runs (it is in the ``frameworks`` extra, not in the core);
PyTorch is optional even for the course, so the check that needs it says how to install
it instead of failing with an ImportError.
"""

from __future__ import annotations

import importlib.util
import time
import warnings
from typing import Any, Callable

import numpy as np

from hybridlab.exercises._common import Feedback, judge_ratio, verdict

TORCH_HINT = ("this exercise needs PyTorch, which the course does not install; a CPU-only "
              "build: .venv/bin/pip install torch==2.13.0 --index-url "
              "https://download.pytorch.org/whl/cpu")


def clip_norm(x: Any) -> Any:
    """Exercise 1's function: ``x`` scaled down to norm 1 when its norm is above 1. The
    Python ``if`` on a traced value is what ``jax.jit`` cannot compile."""
    import jax.numpy as jnp

    norm = jnp.sqrt((x * x).sum())
    if norm > 1:
        return x / norm
    return x


def gated(w: Any, x: Any) -> Any:
    """Exercise 2's function: ``tanh(x . w) * (1 - x . w)``."""
    import jax.numpy as jnp

    y = x @ w
    return jnp.tanh(y) * (1 - y)


def chatty(x: Any) -> Any:
    """Exercise 3's function: two prints and one decision on a value, between tensor
    operations."""
    total = x.sum()
    print("the total is", total)
    doubled = x * 2
    print("doubled, the total is", doubled.sum())
    if total > 0:
        return doubled
    return -doubled


def check_jit_rewrite(fn: Callable[[Any], Any]) -> Feedback:
    """``fn`` computes :func:`clip_norm` and compiles under ``jax.jit``."""
    import jax

    big = np.array([[3.0, -4.0], [0.0, 12.0]], dtype=np.float32)  # norm 13: scaled down
    small: np.ndarray = big / 100  # norm 0.13: returned unchanged
    try:
        compiled = jax.jit(fn)
        results: list[np.ndarray] = [np.asarray(compiled(x)) for x in (big, small)]
    except jax.errors.ConcretizationTypeError as err:
        return Feedback(False, f"jax.jit cannot compile it ({type(err).__name__}): a Python "
                               "`if` needs the norm while jax.jit traces with abstract "
                               "values. Let an operator choose: jnp.where(norm > 1, x / norm, "
                               "x), or lax.cond(norm > 1, ...)")
    except Exception as err:  # the student's code: report, never raise
        return Feedback(False, f"jax.jit(fn)(x) raised {type(err).__name__}: {err}")
    for x, got in zip((big, small), results):
        want: np.ndarray = x / max(1.0, float(np.sqrt((x * x).sum())))
        if got.shape != x.shape or not np.allclose(got, want, atol=1e-6):
            branch = "above" if x is big else "at most"
            return Feedback(False, f"on an input of norm {branch} 1 the result is not x "
                                   f"scaled to norm at most 1: got {got.round(4).tolist()}, "
                                   f"expected {want.round(4).tolist()}")
    return Feedback(True, "it compiles, and both branches give the right result: the "
                          "decision is an operator in the compiled program")


def check_jaxpr_converter(convert: Callable[[Any, list[str]], Any]) -> Feedback:
    """``convert(closed_jaxpr, names)`` turns the jaxpr of :func:`gated` into a hybridlab
    Symbol whose inputs are named ``names``, computing what JAX computes."""
    import jax

    from hybridlab import nd
    from hybridlab.symbol import Symbol

    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.5, (4, 3)).astype(np.float32)
    x = rng.normal(size=(2, 4)).astype(np.float32)
    closed = jax.make_jaxpr(gated)(w, x)
    primitives = sorted({eqn.primitive.name for eqn in closed.jaxpr.eqns})
    try:
        symbol = convert(closed, ["w", "x"])
    except Exception as err:  # the student's code: report, never raise
        return Feedback(False, f"convert raised {type(err).__name__}: {err} -- the jaxpr "
                               f"uses the primitives {primitives}; a literal (the 1.0 of "
                               "`1 - y`) arrives as jax.extend.core.Literal, read its .val")
    if not isinstance(symbol, Symbol):
        return Feedback(False, f"convert must return a hybridlab Symbol (built with sym.*), "
                               f"not {type(symbol).__name__}")
    if sorted(symbol.list_arguments()) != ["w", "x"]:
        return Feedback(False, f"the Symbol's inputs are {symbol.list_arguments()}; name "
                               "them after the jaxpr's inputs: sym.var(name) for each of "
                               "closed.jaxpr.invars, with the names given")
    try:
        got = symbol.eval(w=nd.array(w), x=nd.array(x))[0].asnumpy()
    except Exception as err:  # the student's graph: report, never raise
        return Feedback(False, f"the Symbol does not run: {type(err).__name__}: {err}")
    want = np.asarray(gated(w, x))
    if got.shape != want.shape or not np.allclose(got, want, atol=1e-5):
        return Feedback(False, "the Symbol computes something else than JAX: check the order "
                               "of the operands of sub (1 - y, not y - 1) and that mul "
                               "multiplies the tanh by (1 - y)")
    return Feedback(True, f"the jaxpr's primitives {primitives} became hybridlab operators, "
                          "and the converted graph computes what JAX computes")


def check_graph_count(guess: int) -> Feedback:
    """How many graphs ``torch._dynamo.explain`` reports for :func:`chatty`."""
    if importlib.util.find_spec("torch") is None:
        return Feedback(False, TORCH_HINT)
    import contextlib
    import io

    import torch

    if not isinstance(guess, int) or guess < 0:
        return Feedback(False, f"guess a whole number of graphs, not {guess!r}")
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Dynamo's note on print
        report = torch._dynamo.explain(chatty)(torch.ones(3))  # prints run between graphs
    graphs = report.graph_count
    reasons = "; ".join(r.reason.splitlines()[0] for r in report.break_reasons)
    why = (f"TorchDynamo ends a graph at each line it cannot capture -- each print, and the "
           f"`if` on a tensor's value -- runs that line in Python and starts a new graph "
           f"after it; a stretch of code between two breaks is a graph when it holds tensor "
           f"operations (the sum, the product and its sum, the comparison `total > 0`). "
           f"Its reasons for breaking: {reasons}")
    if guess == graphs:
        return Feedback(True, f"{graphs} graphs. {why}")
    return Feedback(False, f"explain reports {graphs} graphs, not {guess}. {why}")


def check_dispatch_ratio(guess: float, size: int = 512, runs: int = 5,
                         timer: Callable[[], float] = time.perf_counter) -> Feedback:
    """Predict (time until the value is ready) / (time until the call returned) for a
    jitted product of two ``size`` x ``size`` float32 matrices; timed by the course's
    protocol (:func:`hybridlab.lab.timing.measure`, one thread), the call as a lap."""
    import jax

    from hybridlab.lab.timing import measure

    if not isinstance(guess, (int, float)) or not guess > 0:
        return Feedback(False, f"guess a positive ratio, not {guess!r}")
    a = jax.device_put(np.random.default_rng(0).normal(size=(size, size)).astype(np.float32))
    product = jax.jit(lambda m: m @ m)

    def call_then_wait(laps: Any) -> Any:
        with laps("call"):
            result = product(a)
        return result.block_until_ready()

    m = measure({"call and wait": call_then_wait}, rounds=runs, calls=1, timer=timer)
    push, done = m.lap("call and wait", "call"), m["call and wait"]
    measured = done / push
    judgement = judge_ratio(float(guess), measured)
    report = (f"measured {measured:.0f} (the call returned after {push * 1e6:.0f} µs, the "
              f"value was ready after {done * 1e6:.0f} µs); your guess is {judgement.off}. "
              "Why: the "
              f"call only hands the compiled program and its input to the runtime, a cost "
              f"that does not depend on the size; the product's {2 * size ** 3:,} "
              "floating-point operations run after it returned")
    return verdict(judgement, report)
