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

    def kernel(rt: Any, shape: tuple, ctx: Any, dtype: str, **values: Any) -> Any:
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


def _integers(rng: Any, shape: tuple, low: int, high: int) -> Any:
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


def _generalized_negative_binomial(rng: Any, shape: tuple, mu: float, alpha: float) -> Any:
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
