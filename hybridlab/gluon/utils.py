"""MXNet's ``gluon.utils``: split a batch into slices, and clip gradients by their norm.

``split_and_load(batch, [mx.cpu(0), mx.cpu(1)])`` is data parallelism's first step: one
slice of the batch per device, each slice copied to its device (``as_in_context``: an
engine op ``_copyto``); with one device, the whole batch on it.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from hybridlab import ndarray
from hybridlab.context import as_context


def split_data(data: Any, num_slice: int, batch_axis: int = 0,
               even_split: bool = True) -> list:
    """``num_slice`` slices of ``data`` along ``batch_axis`` (sizes as ``np.array_split``);
    with ``even_split`` the axis must divide evenly."""
    size = data.shape[batch_axis]
    if even_split and size % num_slice:
        raise ValueError(f"split_data: data with shape {data.shape} cannot be split evenly "
                         f"into {num_slice} slices along axis {batch_axis}; use a batch size "
                         f"divisible by {num_slice} or even_split=False")
    if num_slice == 1:
        return [data]
    num_slice = min(num_slice, size)
    bounds = [i * (size // num_slice) + min(i, size % num_slice) for i in range(num_slice + 1)]
    return [ndarray.slice_axis(data, axis=batch_axis, begin=start, end=stop)  # type: ignore[attr-defined]
            for start, stop in zip(bounds, bounds[1:])]


def split_and_load(data: Any, ctx_list: Any, batch_axis: int = 0,
                   even_split: bool = True) -> list:
    """One slice of ``data`` per context in ``ctx_list``, on that context (the whole batch
    for one)."""
    if not isinstance(ctx_list, (list, tuple)):
        ctx_list = [ctx_list]
    devices = [as_context(ctx, "split_and_load") for ctx in ctx_list]
    if not devices:
        raise ValueError("split_and_load: ctx_list is empty; give the devices to split over, "
                         "e.g. [mx.cpu(0), mx.cpu(1)]")
    if not isinstance(data, ndarray.NDArray):
        data = ndarray.array(data, ctx=devices[0])
    if len(devices) == 1:
        return [data.as_in_context(devices[0])]
    slices = split_data(data, len(devices), batch_axis, even_split)
    return [part.as_in_context(ctx) for part, ctx in zip(slices, devices)]


def clip_global_norm(arrays: list, max_norm: float, check_isfinite: bool = True) -> Any:
    """Scale ``arrays`` in place so that their joint 2-norm is at most ``max_norm``;
    returns that norm before scaling (a float; an NDArray with ``check_isfinite=False``)."""
    total = ndarray.add_n(*[(x.astype("float32") ** 2).sum() for x in arrays])  # type: ignore[attr-defined]
    norm = total.sqrt()
    if check_isfinite and not math.isfinite(norm.asscalar()):
        warnings.warn("clip_global_norm: the norm of the arrays is not finite (nan or inf); "
                      "they were scaled by nan", stacklevel=2)
    scale = max_norm / (norm + 1e-8)
    scale = ndarray.minimum(scale, ndarray.ones_like(scale))  # type: ignore[attr-defined]
    for x in arrays:
        x[:] = x * scale.astype(x.dtype)
    return norm.asscalar() if check_isfinite else norm
