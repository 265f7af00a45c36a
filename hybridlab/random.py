"""Random numbers that are the same whatever the engine (``mx.random``).

What this module teaches
------------------------
With a lazy, multi-threaded engine, operators run in an order the program does not
control. If random operators shared one generator, the numbers a ``dropout`` got would
depend on which worker ran first. So the seed of each random operator is drawn when it
is *pushed*, in program order, from one stream: the ``k``-th random op after
``seed(s)`` always gets the generator ``PCG64([s, k])``, on every engine and any
number of workers. The kernel then owns its generator; nothing is shared at run time.

``normal`` and ``uniform`` forward to ``nd.random.*`` (the registry's random ops).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

_DEFAULT_SEED = 0  # MXNet too starts from a fixed seed, so unseeded runs repeat
_stream = {"seed": _DEFAULT_SEED, "counter": itertools.count()}


def seed(seed_state: int, ctx: Any = "all") -> None:
    """Restart the seed stream: the same seed gives the same numbers (``mx.random.seed``)."""
    if isinstance(seed_state, bool) or not isinstance(seed_state, (int, np.integer)):
        raise TypeError(f"mx.random.seed: seed_state must be an int, got {seed_state!r}")
    # itertools.count's next() is atomic under the GIL, so threads pushing ops stay safe
    _stream["counter"] = itertools.count()
    # a negative seed is a seed too (MXNet passes it to C as an int): numpy's generators
    # take unsigned entropy, so it is read modulo 2**64 (the non-negative seeds unchanged)
    _stream["seed"] = int(seed_state) % 2**64


def next_generator() -> np.random.Generator:
    """The generator for the next random operator pushed (called at push time)."""
    return np.random.Generator(np.random.PCG64([_stream["seed"],
                                                next(_stream["counter"])]))  # type: ignore[call-overload]


def normal(*args: Any, **kwargs: Any) -> Any:
    """``mx.random.normal`` is ``nd.random.normal``."""
    from hybridlab import ndarray  # lazy: ndarray imports this module for the seed stream

    return ndarray.random.normal(*args, **kwargs)  # type: ignore[attr-defined]  # (populate)


def uniform(*args: Any, **kwargs: Any) -> Any:
    """``mx.random.uniform`` is ``nd.random.uniform``."""
    from hybridlab import ndarray  # lazy: ndarray imports this module for the seed stream

    return ndarray.random.uniform(*args, **kwargs)  # type: ignore[attr-defined]  # (populate)


def poisson(*args: Any, **kwargs: Any) -> Any:
    """``mx.random.poisson`` is ``nd.random.poisson``."""
    from hybridlab import ndarray  # lazy: ndarray imports this module for the seed stream

    return ndarray.random.poisson(*args, **kwargs)  # type: ignore[attr-defined]  # (populate)
