"""The engine-free namespace: every registry op run at once on numpy arrays.

What this module teaches
------------------------
The registry knows how to compute every operator; a *front end* decides *when* and
*where*. ``nd`` pushes kernels to the engine, ``sym`` records graph nodes; this module is
the simplest possible front end: it calls the kernel immediately. It is what the
registry's tests use to check kernels and gradients (``grad(F=eager, ...)``), and a
small example of :func:`~hybridlab.ops.registry.populate` at work::

    >>> from hybridlab.ops import eager
    >>> eager.broadcast_add(np.ones(2), np.ones((3, 1))).asnumpy().shape
    (3, 2)

Invariants
----------
* Results are :class:`Tensor` s: a numpy array with *only* the registry's arithmetic
  dunders. A gradient rule tested here therefore cannot lean on numpy methods that
  ``NDArray`` or ``Symbol`` lack.
* Every call checks the kernel's result against the op's shape rule (``infer``): a
  disagreement is a registry bug and raises at once.
* Ops that need a run context get ``training=False`` and a fixed-seed generator, so the
  namespace is deterministic.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from hybridlab.ops.registry import (
    Aval,
    OpDef,
    RunContext,
    install_dunders,
    populate,
    run_lowering,
)


class Tensor:
    """A numpy array wrapped so that ``+ - * / ** %`` and comparisons use registry ops."""

    __array_ufunc__ = None  # make ``ndarray * Tensor`` defer to Tensor's dunders

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def asnumpy(self) -> np.ndarray:
        return self.data

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        return f"Tensor({self.data!r})"


def _unwrap(value: Any, op: OpDef) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.data
    if isinstance(value, np.ndarray):
        return value
    raise TypeError(f"{op.name}: inputs must be numpy arrays or Tensors, got {type(value)}")


def apply_eagerly(op: OpDef, inputs: list[Any], attrs: dict[str, Any], name: Any = None,
                  hint: str = "") -> Any:
    """Run ``op`` now: parse attributes, check shapes with ``infer``, call the kernel."""
    parsed = op.parse_attrs(attrs)
    arrays = [_unwrap(v, op) for v in inputs if v is not None]
    expected = op.infer(*(Aval(a.shape, a.dtype) for a in arrays), **parsed)
    if op.needs_context:
        parsed = {**parsed, "rt": RunContext(training=False, rng=np.random.default_rng(0))}
    result = op.kernel(*arrays, **parsed)
    results = result if isinstance(result, tuple) else (result,)
    actual = [Aval(r.shape, r.dtype) for r in results]
    if actual != expected:
        raise RuntimeError(
            f"{op.name}: the kernel returned {[str(a) for a in actual]} but infer promised "
            f"{[str(a) for a in expected]} (a registry bug)")
    wrapped = [Tensor(r) for r in results]
    return tuple(wrapped) if isinstance(result, tuple) else wrapped[0]


def expand_eagerly(op: OpDef, inputs: list[Any], attrs: dict[str, Any], name: Any = None,
                   hint: str = "") -> Any:
    """A layer operator: its lowering, run op by op here (``training=False``)."""
    tensors = [v if isinstance(v, Tensor) else Tensor(_unwrap(v, op)) for v in inputs]
    return run_lowering(op, sys.modules[__name__], tensors, attrs)


install_dunders(Tensor, apply_eagerly)
populate(sys.modules[__name__], apply_eagerly, expand=expand_eagerly)
