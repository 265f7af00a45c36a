"""The store of one process (``mx.kv.create('local' | 'device')``): a push sums, a pull copies.

What this module teaches
------------------------
The store keeps one NDArray per key on its device: ``'local'`` on ``cpu(0)``, ``'device'``
on the device of the first value given to ``init`` (MXNet sums on the GPUs; here every
device is a CPU, so the two differ only in where the sum is). A push copies each device's
value to the store's device and sums them (``add_n``); with no optimizer the sum
*replaces* the stored value, after ``set_optimizer`` it *updates* it (``kv_update``, each
key once, not once per device). A pull copies the stored value into each out
(``_copyto``). Every step is an engine op, so nothing waits in Python and the Gantt chart
of a training step shows the copies beside the compute.

MXNet's checks, as MXNet words them: a key pushed or pulled before ``init`` ("key 3 has
not been inited"), a key given to ``init`` twice ("duplicate init of key 3").
:func:`key_value_pairs`, :func:`first_value` and :func:`arrays` hold the checks every store
makes (the dist store in dist.py too).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hybridlab import autograd
from hybridlab import ndarray as nd
from hybridlab import optimizer as opt
from hybridlab.context import cpu
from hybridlab.errors import MXNetError
from hybridlab.kvstore.compression import compression_threshold, quantize_on_device
from hybridlab.ops import registry


class KVStore:
    """One process's store: ``init``, ``push``, ``pull``, ``pushpull``, ``set_optimizer``."""

    def __init__(self, name: str = "local") -> None:
        self.type = name
        # MXNet's rule: a name with "device" keeps each key on its first value's device
        self._on_device = "device" in name
        self._store: dict[Any, nd.NDArray] = {}
        self._updater: Callable[[Any, nd.NDArray, nd.NDArray], None] | None = None
        self._optimizer: opt.Optimizer | None = None
        self._threshold = 0.0  # 2bit gradient compression's threshold (0: off)
        self._residuals: dict[Any, Any] = {}  # (key, device index) -> the sender's residual

    def __repr__(self) -> str:
        return f"<KVStore {self.type} keys={list(self._store)}>"

    @property
    def rank(self) -> int:
        """This worker's number among ``num_workers`` (0 in one process)."""
        return 0

    @property
    def num_workers(self) -> int:
        return 1

    def init(self, key: Any, value: Any) -> None:
        """Store a copy of ``value`` under ``key`` (lists of keys and values: one each)."""
        for k, v in key_value_pairs(key, value, "init"):
            first = first_value(k, v, known=self._store)
            home = first.context if self._on_device else cpu(0)
            self._store[k] = first.copyto(home)

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Sum the values (one per device) of each key into the store, or update the
        stored value with the sum when an optimizer is set."""
        for k, values in key_value_pairs(key, value, "push"):
            stored = known(self._store, k, "push")
            self._apply(k, self._sum(k, arrays(k, values, "push", stored.shape)), stored)

    def pull(self, key: Any, out: Any = None, priority: int = 0,
             ignore_sparse: bool = True) -> None:
        """Copy each key's stored value into ``out`` (an NDArray, or one per device)."""
        for k, outs in key_value_pairs(key, out, "pull"):
            self._pull_into(k, known(self._store, k, "pull"), outs)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """``push`` then ``pull`` (``out=None``: into ``value`` itself)."""
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def set_optimizer(self, optimizer: Any) -> None:
        """Update on the store: each push applies ``optimizer`` to the stored value."""
        self._optimizer = opt.create(optimizer)
        self._updater = opt.Updater(self._optimizer)

    def set_gradient_compression(self, compression_params: dict) -> None:
        """MXNet's 2-bit compression of what is pushed, with error feedback (compression.py):
        ``{'type': '2bit', 'threshold': 0.5}``, the threshold 0.5 if not given."""
        if "device" not in self.type and "dist" not in self.type:  # MXNet's check and words
            raise MXNetError(f"Gradient compression is not supported for this type of kvstore "
                             f"({self.type!r}); use mx.kv.create('device') or a dist_* store")
        self._threshold = compression_threshold(compression_params)
        self._residuals.clear()

    def _set_hyper(self, name: str, value: float) -> None:
        """A new ``learning_rate`` or ``rescale_grad`` for the optimizer on the store
        (``Trainer.set_learning_rate``, a new batch size), from the next push on."""
        if self._optimizer is not None:
            self._optimizer.hyper[name] = opt.check_number(name, value)

    def _set_updater(self, updater: Callable[[Any, nd.NDArray, nd.NDArray], None]) -> None:
        """MXNet's ``updater(key, summed, stored)``, which changes ``stored`` in place."""
        self._updater = updater

    # -- the steps, each an engine op -------------------------------------------------
    def _sum(self, key: Any, values: list[nd.NDArray]) -> nd.NDArray:
        """The values summed on the store's device (copies first when they are elsewhere)."""
        with autograd.pause():
            if self._threshold:  # each device sends its thresholded residual
                values = [self._compressed(key, index, value)
                          for index, value in enumerate(values)]
            return summed(values, self._store[key].context)

    def _compressed(self, key: Any, index: int, grad: nd.NDArray) -> nd.NDArray:
        """What device ``index`` sends for ``key``: its residual plus ``grad``, thresholded
        (compression.py), the residual kept per key and device."""
        residual = self._residuals.get((key, index))
        if residual is None or residual.shape != grad.shape:
            residual = nd.from_numpy(np.zeros(grad.shape, grad.dtype), grad.context)
            self._residuals[(key, index)] = residual
        return quantize_on_device(grad, residual, self._threshold)

    def _apply(self, key: Any, total: nd.NDArray, stored: nd.NDArray) -> None:
        if self._updater is None:
            nd._assign(stored, total)  # no optimizer: the sum replaces the value
        else:
            self._updater(key, total, stored)

    def _pull_into(self, key: Any, stored: nd.NDArray, outs: Any) -> None:
        for target in arrays(key, outs, "pull"):
            with autograd.pause():
                nd._apply(registry.get("_copyto"), [stored], {"out": target})


# -- the checks and steps every store makes (dist.py's too) ----------------------------------
def key_value_pairs(key: Any, value: Any, what: str) -> list[tuple[Any, Any]]:
    """``(key, value)`` pairs from one key or a list of keys (MXNet's two call forms)."""
    if value is None and what == "pull":
        raise ValueError("kvstore pull: give out= (the arrays to copy the values into, "
                         "e.g. out=param.list_data())")
    if isinstance(key, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(key):
            raise ValueError(f"kvstore {what}: {len(key)} keys need a list of {len(key)} "
                             f"values (one per key), got {type(value).__name__}")
        pairs = list(zip(key, value))
    else:
        pairs = [(key, value)]
    for k, _ in pairs:
        if not isinstance(k, (int, str)) or isinstance(k, bool):
            raise TypeError(f"kvstore {what}: a key is an int or a str, got {k!r}")
    return pairs


def first_value(key: Any, value: Any, known: Any) -> nd.NDArray:
    """The value ``init`` stores (the first of a list: one per device), checked; a key
    already among ``known`` is MXNet's "duplicate init"."""
    if key in known:
        raise MXNetError(f"kvstore init: duplicate init of key {key}; each key is "
                         f"initialised once (check for a second kv.init({key!r}, ...))")
    return arrays(key, value, "init")[0]


def known(table: dict[Any, Any], key: Any, what: str) -> Any:
    """What ``table`` holds for ``key``; a key never given to ``init`` is MXNet's error."""
    if key not in table:
        raise MXNetError(f"kvstore {what}: key {key} has not been inited; call "
                         f"kv.init({key!r}, value) first (known keys: {list(table)})")
    return table[key]


def arrays(key: Any, values: Any, what: str, shape: tuple[int, ...] | None = None
           ) -> list[nd.NDArray]:
    """A key's values (one NDArray, or one per device) as a list, each checked: an
    NDArray, and of the stored ``shape`` when one is given (a push's)."""
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    for value in values:
        if not isinstance(value, nd.NDArray):
            raise TypeError(f"kvstore {what}: key {key} needs NDArrays, got "
                            f"{type(value).__name__}; wrap values with nd.array(...)")
        if shape is not None and value.shape != shape:
            raise ValueError(f"kvstore {what}: key {key} holds shape {shape}, got a value "
                             f"of shape {value.shape}")
    return values


def summed(values: list[nd.NDArray], device: Any) -> nd.NDArray:
    """The values copied to ``device`` and added there (``add_n``), as engine ops."""
    moved = [value.as_in_context(device) for value in values]
    return moved[0] if len(moved) == 1 else nd.add_n(*moved)  # type: ignore[attr-defined]
