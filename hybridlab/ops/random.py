"""Random operators: ``random.normal``, ``random.uniform``, ``random.randint``.

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

from hybridlab.errors import AttributeValueError
from hybridlab.ops import _infer
from hybridlab.ops.registry import Attr, Kind, OpDef, composite, register


def _sampler(name: str, draw: Any, params: dict[str, Attr], aliases: tuple[str, ...], doc: str,
             dtype: str = "float32") -> Any:
    attrs = {**params, "shape": Attr("shape", (1,)), "ctx": Attr("any", None),
             "dtype": Attr("dtype", dtype)}
    return register(OpDef(
        name=name, grad=None, kind=Kind.OPAQUE, inputs=(), attrs=attrs, pure=False,
        needs_context=True, aliases=aliases, doc=doc,
        kernel=lambda rt, shape, ctx, dtype, **kw: draw(rt.rng, shape, **kw).astype(dtype),
        infer=lambda shape, ctx, dtype, **kw: _check(name, kw) or _infer.created(  # type: ignore[func-returns-value]  # (None or the list)
            name, shape, dtype)))


def _check(name: str, params: dict[str, Any]) -> None:
    """A sampler's parameters must make sense: ``low < high``, ``scale >= 0``.

    Checked when the op is called: numpy would only complain once the engine ran it.
    """
    if "high" in params and not params["low"] < params["high"]:
        raise AttributeValueError(f"{name}: low={params['low']} must be less than "
                                  f"high={params['high']}")
    if "scale" in params and not params["scale"] >= 0:  # `not >=` also catches nan
        raise AttributeValueError(f"{name}: scale={params['scale']} is a standard deviation "
                                  f"and must be >= 0")


_sampler("_random_normal", lambda rng, shape, loc, scale: rng.normal(loc, scale, shape),
         {"loc": Attr("float", 0.0), "scale": Attr("float", 1.0)},
         ("random.normal", "random_normal", "normal"),
         "Samples from the normal distribution with mean ``loc`` and std ``scale``.")
_sampler("_random_uniform", lambda rng, shape, low, high: rng.uniform(low, high, shape),
         {"low": Attr("float", 0.0), "high": Attr("float", 1.0)},
         ("random.uniform", "random_uniform", "uniform"),
         "Samples from the uniform distribution on ``[low, high)``.")
_sampler("_random_randint", lambda rng, shape, low, high: rng.integers(low, high, shape),
         {"low": Attr("int"), "high": Attr("int")}, ("random.randint", "random_randint"),
         "Integers drawn uniformly from ``[low, high)`` (int32 by default).", "int32")
_sampler("_random_poisson", lambda rng, shape, lam: rng.poisson(lam, shape),
         {"lam": Attr("float", 1.0, low=0)}, ("random.poisson", "random_poisson"),
         "Counts drawn from the Poisson distribution of rate ``lam``.")


@composite("random.randn")
def randn(F: Any, *shape: int, loc: float = 0.0, scale: float = 1.0, dtype: Any = "float32",
          ctx: Any = None, name: Any = None) -> Any:
    """MXNet's ``nd.random.randn(2, 3)``: normal samples, the shape given as arguments."""
    return F._random_normal(loc=loc, scale=scale, shape=shape, dtype=dtype, ctx=ctx, name=name)
