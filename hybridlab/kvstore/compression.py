"""MXNet's 2-bit gradient compression, with error feedback: what a store's push sends.

What this module teaches
------------------------
``kv.set_gradient_compression({'type': '2bit', 'threshold': 0.5})`` (``device`` and
``dist_*`` stores, as in MXNet; ``local`` refuses it): each pushed gradient is added to
the sender's *residual* (one per key and device; per key on a dist worker, whose devices'
sum is what travels), and what is sent is the residual thresholded to ``+threshold``,
``-threshold`` or 0 -- three values, which MXNet packs in 2 bits each -- while the rest
stays in the residual for the next push (error feedback: nothing is lost, only delayed).
The receiver sums the thresholded values. hybridlab sends them as float32 (the values are
MXNet's, the bytes are not packed).

:func:`quantize_2bit` is the rule on numpy arrays (a dist worker applies it to its sum
before the sum travels); :func:`quantize_on_device` runs it as one engine op,
``_quantize_2bit``, on the gradient's device (a ``device`` store's push), so the Gantt
chart of a step shows it beside the copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab import engine
from hybridlab import ndarray as nd
from hybridlab import optimizer as opt


def quantize_2bit(grad: np.ndarray, residual: np.ndarray, threshold: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """MXNet's 2-bit quantisation: ``(sent, residual')`` where ``r = residual + grad``,
    ``sent`` is ``threshold`` where ``r >= threshold``, ``-threshold`` where ``r <=
    -threshold``, else 0, and ``residual' = r - sent`` (new arrays; nothing written)."""
    total = residual + grad
    sent = np.zeros_like(total)
    sent[total >= threshold] = threshold
    sent[total <= -threshold] = -threshold
    return sent, total - sent


def quantize_on_device(grad: nd.NDArray, residual: nd.NDArray, threshold: float
                       ) -> nd.NDArray:
    """One engine op on the gradient's device: the residual plus ``grad``, thresholded
    (the result), and what is left of it (the residual's next value, written in place)."""
    sent = nd.empty_like_aval(grad._aval, grad.context)

    def quantize() -> None:
        sent._data, residual._data = quantize_2bit(grad._data, residual._data, threshold)  # type: ignore[arg-type]  # (computed: the engine ran their writers)

    engine.current().push(quantize, [grad._var, residual._var], [sent._var, residual._var],
                          "_quantize_2bit", grad.context)
    return sent


def compression_threshold(params: Any) -> float:
    """The threshold of ``{'type': '2bit', 'threshold': t}`` (MXNet's default t: 0.5)."""
    given = params if isinstance(params, dict) else {}
    threshold = given.get("threshold", 0.5)
    if given.get("type") != "2bit" or set(given) - {"type", "threshold"}:
        raise ValueError(f"set_gradient_compression: hybridlab has MXNet's '2bit' compression "
                         f"with a 'threshold', e.g. {{'type': '2bit', 'threshold': 0.5}}; got "
                         f"{params!r}")
    if not opt.check_number("threshold", threshold) > 0:
        raise ValueError(f"set_gradient_compression: the threshold must be greater than 0, "
                         f"got {threshold!r}")
    return float(threshold)
