"""MXNet's first autograd interface (``mx.contrib.autograd``), kept for old code.

MXNet 0.11 spelled recording as a *training section*: ``train_section()`` records and
sets training mode at once, ``test_section()`` turns both off, and ``grad_and_loss(f)``
wraps a function so that calling it returns its gradients beside its value. MXNet 1.x
kept the module for code written then; here each name is a thin layer over
``hybridlab.autograd`` (one tape, one set of gradient rules).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, Sequence

from hybridlab import autograd, ndarray


def set_is_training(is_train: bool) -> bool:
    """Record and train (``True``) or neither; returns the previous training flag."""
    previous = autograd.set_training(is_train)
    autograd.set_recording(is_train)
    return previous


@contextlib.contextmanager
def _section(is_train: bool) -> Iterator[None]:
    recording, training = autograd.is_recording(), autograd.is_training()
    set_is_training(is_train)
    try:
        yield
    finally:
        autograd.set_recording(recording)
        autograd.set_training(training)


def train_section() -> contextlib.AbstractContextManager:
    """``with train_section():`` records operations in training mode."""
    return _section(True)


def test_section() -> contextlib.AbstractContextManager:
    """``with test_section():`` neither records nor trains (inside a train_section)."""
    return _section(False)


def mark_variables(variables: Sequence[Any], gradients: Sequence[Any],
                   grad_reqs: str | Sequence[str] = "write") -> None:
    """Make each array a variable whose gradient goes to the matching array."""
    autograd.mark_variables(variables, gradients, grad_reqs)


def backward(outputs: Any, out_grads: Any = None, retain_graph: bool = False) -> None:
    """Gradients of ``outputs`` into the marked variables (``None`` in ``out_grads``:
    ones for that output)."""
    autograd.backward(outputs, out_grads, retain_graph)


def compute_gradient(outputs: Any) -> None:
    """``backward(outputs)``, MXNet's older name."""
    backward(outputs)


def grad_and_loss(func: Callable[..., Any], argnum: int | Sequence[int] | None = None
                  ) -> Callable[..., tuple[list, Any]]:
    """``func`` wrapped to return ``(gradients, value)``: the gradients of its value with
    respect to its arguments (those at the positions ``argnum``, else all of them)."""
    @functools.wraps(func)
    def wrapped(*args: Any) -> tuple[list, Any]:
        positions = range(len(args)) if argnum is None else (
            [argnum] if isinstance(argnum, int) else list(argnum))
        variables = [args[i] for i in positions]
        for x in variables:
            if not isinstance(x, ndarray.NDArray):
                raise TypeError(f"grad_and_loss: argument {x!r} is not an NDArray; pass "
                                f"argnum= to name the positions of the array arguments")
        grads = [ndarray.zeros_like(x) for x in variables]  # type: ignore[attr-defined]
        mark_variables(variables, grads)
        with train_section():
            outputs = func(*args)
        compute_gradient([outputs] if isinstance(outputs, ndarray.NDArray) else outputs)
        return grads, outputs
    return wrapped


def grad(func: Callable[..., Any], argnum: int | Sequence[int] | None = None
         ) -> Callable[..., list]:
    """``func`` wrapped to return only its gradients (see :func:`grad_and_loss`)."""
    with_loss = grad_and_loss(func, argnum)

    @functools.wraps(func)
    def wrapped(*args: Any) -> list:
        return with_loss(*args)[0]
    return wrapped
