"""Random operators: ``random.normal``, ``uniform``, ``randint``, ``gamma``, ``exponential``,
``poisson``, ``negative_binomial``, ``generalized_negative_binomial``, ``randn``.

What this module teaches
------------------------
A random op is *not pure*: the same call gives different numbers each time, so the
compiler must never merge two of them (CSE) or fold one into a constant. That fact is
the field ``pure=False``; passes read it instead of keeping a list of random op names.

Determinism: the kernel never touches a global generator. It draws from ``rt.rng``, a
``numpy.random.Generator`` that the front end seeds when it pushes the op (from
``mx.random.seed``), so results do not depend on which engine worker runs it.

Dropout's random mask lives with the other layer operators in ``nn.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import AttributeValueError
from hybridlab.ops import _infer
from hybridlab.ops.registry import Attr, Kind, OpDef, composite, register


def _sampler(name: str, draw: Any, params: dict[str, Attr], aliases: tuple[str, ...], doc: str,
             dtype: str = "float32", checks: tuple[tuple[str, str], ...] = ()) -> Any:
    """Register a sampler; ``checks``: ``(parameter, "> 0" or ">= 0")`` pairs, MXNet's
    tests of its parameters, made when the kernel runs."""
    attrs = {**params, "shape": Attr("shape", (1,)), "dtype": Attr("dtype", dtype),
             "ctx": Attr("any", None)}  # MXNet's order: a fourth positional is the dtype

    def kernel(rt: Any, shape: tuple[int, ...], ctx: Any, dtype: str, **values: Any) -> Any:
        _check(name, values, checks)  # in the kernel, as MXNet: raised at the sync point
        return draw(rt.rng, shape, **values).astype(dtype)

    return register(OpDef(
        name=name, grad=None, kind=Kind.OPAQUE, inputs=(), attrs=attrs, pure=False,
        needs_context=True, aliases=aliases, doc=doc, kernel=kernel,
        infer=lambda shape, ctx, dtype, **kw: _infer.created(name, shape, dtype)))


_MEANING = {"scale": "is a standard deviation", "lam": "is a rate",
            "alpha": "is a shape", "beta": "is a scale", "k": "is a count of failures",
            "p": "is a probability", "mu": "is a mean"}


def _check(name: str, params: dict[str, Any], checks: tuple[tuple[str, str], ...]) -> None:
    """A sampler's parameters must make sense: ``low <= high``, ``scale > 0``, ...

    Checked when the kernel runs, where MXNet checks them (src/operator/random/
    sample_op.h): an array that can never be computed is reported at the next sync point
    (``asnumpy``, ``wait_to_read``, ``waitall``), which names this operator and the line
    that pushed it.
    """
    if "high" in params and not params["low"] <= params["high"]:
        raise AttributeValueError(f"{name}: low={params['low']} must be less than or equal "
                                  f"to high={params['high']}")
    for param, rule in checks:
        value = params[param]
        if not (value > 0 if rule == "> 0" else value >= 0):  # `not` also catches nan
            raise AttributeValueError(f"{name}: {param}={value} {_MEANING[param]} and must "
                                      f"be {rule}")


_sampler("_random_normal", lambda rng, shape, loc, scale: rng.normal(loc, scale, shape),
         {"loc": Attr("float", 0.0), "scale": Attr("float", 1.0)},
         ("random.normal", "random_normal", "normal"),
         "Samples from the normal distribution with mean ``loc`` and std ``scale``.",
         checks=(("scale", "> 0"),))
_sampler("_random_uniform", lambda rng, shape, low, high: rng.uniform(low, high, shape),
         {"low": Attr("float", 0.0), "high": Attr("float", 1.0)},
         ("random.uniform", "random_uniform", "uniform"),
         "Samples from the uniform distribution on ``[low, high)``.")


def _integers(rng: Any, shape: tuple[int, ...], low: int, high: int) -> Any:
    """``[low, high)``; ``low == high`` gives ``low`` (MXNet accepts it, numpy does not)."""
    return rng.integers(low, high, shape) if high > low else np.full(shape, low)


_sampler("_random_randint", _integers,
         {"low": Attr("int"), "high": Attr("int")}, ("random.randint", "random_randint"),
         "Integers drawn uniformly from ``[low, high)`` (int32 by default).", "int32")
_sampler("_random_gamma", lambda rng, shape, alpha, beta: rng.gamma(alpha, beta, shape),
         {"alpha": Attr("float", 1.0), "beta": Attr("float", 1.0)},
         ("random.gamma", "random_gamma"),
         "Samples from the gamma distribution of shape ``alpha`` and scale ``beta``.",
         checks=(("alpha", "> 0"), ("beta", "> 0")))
_sampler("_random_exponential", lambda rng, shape, lam: rng.exponential(1 / lam, shape),
         {"lam": Attr("float", 1.0)}, ("random_exponential",),
         "Samples from the exponential distribution of rate ``lam`` (mean ``1 / lam``).",
         checks=(("lam", "> 0"),))
_sampler("_random_poisson", lambda rng, shape, lam: rng.poisson(lam, shape),
         {"lam": Attr("float", 1.0)}, ("random.poisson", "random_poisson"),
         "Samples from the Poisson distribution of rate ``lam`` (as floats, MXNet's).",
         checks=(("lam", ">= 0"),))
_sampler("_random_negative_binomial",
         lambda rng, shape, k, p: rng.negative_binomial(k, p, shape) if k > 0 else
         np.zeros(shape), {"k": Attr("int", 1), "p": Attr("float", 1.0)},
         ("random.negative_binomial", "random_negative_binomial"),
         "Failures before ``k`` successes of probability ``p`` each.",
         checks=(("k", ">= 0"), ("p", ">= 0")))


def _generalized_negative_binomial(rng: Any, shape: tuple[int, ...], mu: float,
                                   alpha: float) -> Any:
    """A Poisson whose rate is gamma distributed with mean ``mu`` (``alpha``: dispersion;
    0 is the Poisson of rate ``mu``): MXNet's sampler."""
    if alpha == 0:
        return rng.poisson(mu, shape)
    return rng.poisson(rng.gamma(1 / alpha, alpha * mu, shape))


_sampler("_random_generalized_negative_binomial", _generalized_negative_binomial,
         {"mu": Attr("float", 1.0), "alpha": Attr("float", 1.0)},
         ("random.generalized_negative_binomial", "random_generalized_negative_binomial"),
         "Counts with mean ``mu`` and dispersion ``alpha``: variance mu + alpha mu^2.",
         checks=(("mu", ">= 0"), ("alpha", ">= 0")))


@composite("random.exponential")
def _exponential(F: Any, scale: float = 1.0, shape: Any = (1,), dtype: Any = "float32",
                 ctx: Any = None, name: str | None = None) -> Any:
    """Samples from the exponential distribution of mean ``scale`` (MXNet's front end of
    ``_random_exponential``, whose parameter is the rate ``1 / scale``)."""
    return F._random_exponential(lam=1.0 / scale, shape=shape, dtype=dtype, ctx=ctx, name=name)


@composite("random.randn")
def _randn(F: Any, *shape: int, loc: float = 0.0, scale: float = 1.0, dtype: Any = "float32",
           ctx: Any = None, name: str | None = None) -> Any:
    """Normal samples of the shape given as separate numbers (``randn(2, 3)``)."""
    return F.random_normal(loc=loc, scale=scale, shape=shape or (1,), dtype=dtype, ctx=ctx,
                           name=name)


def _shuffle(x: np.ndarray, rt: Any) -> np.ndarray:
    return rt.rng.permutation(x, axis=0)  # type: ignore[no-any-return]


register(OpDef(
    name="_shuffle", kernel=_shuffle, infer=_infer.same_as_first, grad=None,
    kind=Kind.OPAQUE, pure=False, needs_context=True, aliases=("random.shuffle", "shuffle"),
    doc="The rows (first axis) of ``data`` in a random order; each row keeps its values."))


def _multinomial(data: np.ndarray, rt: Any, shape: tuple[int, ...], get_prob: bool,
                 dtype: str) -> Any:
    """For each distribution in the last axis of ``data`` (probabilities), ``shape``
    draws of a category; with ``get_prob``, also each draw's log-probability."""
    probs = data.reshape(-1, data.shape[-1]).astype(np.float64)
    count = int(np.prod(shape))
    cumulative = np.cumsum(probs, axis=1)
    draws = rt.rng.random((probs.shape[0], count)) * cumulative[:, -1:]
    picked = np.minimum((draws[:, :, None] >= cumulative[:, None, :]).sum(axis=2),
                        data.shape[-1] - 1)
    out_shape = data.shape[:-1] + tuple(shape)
    samples = picked.reshape(out_shape).astype(dtype)
    if not get_prob:
        return samples
    chosen = np.take_along_axis(probs, picked, axis=1)
    with np.errstate(divide="ignore"):
        return samples, np.log(chosen).reshape(out_shape).astype(data.dtype)


def _infer_multinomial(data: Any, shape: tuple[int, ...], get_prob: bool, dtype: str
                       ) -> list[Any]:
    limit = np.iinfo(dtype).max if np.dtype(dtype).kind in "iu" else 2 ** np.finfo(dtype).nmant
    if data.shape[-1] - 1 > limit:
        raise AttributeValueError(f"sample_multinomial: {data.shape[-1]} categories cannot "
                                  f"all be told apart as {dtype}; use dtype='int32'")
    out = tuple(data.shape[:-1]) + tuple(shape)
    samples = _infer.created("sample_multinomial", out or (1,), dtype)
    return samples + ([type(data)(out or (1,), data.dtype)] if get_prob else [])


def _multinomial_grad(samples: np.ndarray, grad: np.ndarray, data: np.ndarray) -> np.ndarray:
    """The gradient of the draws' log-probabilities: ``grad / p`` added at each drawn
    category (what REINFORCE-style training differentiates)."""
    probs = data.reshape(-1, data.shape[-1])
    picked = samples.reshape(probs.shape[0], -1).astype(np.int64)
    result = np.zeros(probs.shape, np.float64)
    rows = np.broadcast_to(np.arange(probs.shape[0])[:, None], picked.shape)
    np.add.at(result, (rows, picked), grad.reshape(picked.shape) / probs[rows, picked])
    return result.reshape(data.shape).astype(data.dtype)


register(OpDef(
    name="_sample_multinomial_grad", kernel=_multinomial_grad, grad=None, kind=Kind.OPAQUE,
    infer=lambda samples, grad, data: [data], inputs=("samples", "grad", "data"),
    doc="The gradient of sample_multinomial's log-probabilities with respect to ``data``."))


register(OpDef(
    name="_sample_multinomial", kernel=_multinomial, infer=_infer_multinomial,
    grad=lambda F, inputs, outputs, out_grads, get_prob, **attrs: [
        F._sample_multinomial_grad(outputs[0], out_grads[1], inputs[0]) if get_prob else None],
    kind=Kind.OPAQUE, pure=False, needs_context=True,
    aliases=("random.multinomial", "sample_multinomial"),
    num_outputs=lambda attrs: 2 if attrs["get_prob"] else 1,
    attrs={"shape": Attr("shape", ()), "get_prob": Attr("bool", False),
           "dtype": Attr("dtype", "int32")},
    doc="Draws categories from the distributions in the last axis of ``data``."))


def _unique_zipfian(rt: Any, range_max: int, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """Per row of ``shape`` (batch, num_sampled): log-uniform draws in ``[0, range_max)``
    until ``num_sampled`` different classes came up; the classes in the order they first
    came, and how many draws that took."""
    rows, wanted = shape
    classes = np.empty(shape, np.int64)
    trials = np.empty(rows, np.int64)
    log_range = np.log1p(range_max)
    for row in range(rows):
        drawn = np.empty(0, np.int64)
        while True:  # draw more until enough distinct classes came up
            more = np.floor(np.expm1(rt.rng.random(2 * wanted) * log_range)).astype(np.int64)
            drawn = np.concatenate([drawn, more % range_max])
            values, first = np.unique(drawn, return_index=True)
            if values.size >= wanted:
                break
        order = np.sort(first)[:wanted]  # positions where a new class came up, in order
        classes[row], trials[row] = drawn[order], order[-1] + 1
    return classes, trials


def _infer_unique_zipfian(range_max: int, shape: tuple[int, ...]) -> list[Any]:
    if len(shape) != 2 or not 0 < shape[1] <= range_max:
        raise AttributeValueError(f"_sample_unique_zipfian: shape must be (batch, num_sampled) "
                                  f"with 0 < num_sampled <= range_max={range_max}, got {shape}")
    return [*_infer.created("_sample_unique_zipfian", shape, "int64"),
            *_infer.created("_sample_unique_zipfian", shape[:1], "int64")]


register(OpDef(
    name="_sample_unique_zipfian", kernel=_unique_zipfian, infer=_infer_unique_zipfian,
    grad=None, kind=Kind.OPAQUE, inputs=(), pure=False, needs_context=True, num_outputs=2,
    attrs={"range_max": Attr("int"), "shape": Attr("shape", (1, 1))},
    doc="Distinct log-uniform classes per row (sampled softmax), and the draws it took."))
