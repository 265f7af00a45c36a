"""The key-value store (``mx.kv``): how devices and machines agree on the weights.

What this module teaches
------------------------
Data parallelism runs one copy of the network per device, each on its slice of the
batch, so each device ends a backward pass with its own gradient. Before the update they
must agree: the gradients are *summed* across devices (an all-reduce), and every copy of
a weight gets the same new value. MXNet puts that behind one small interface, a store of
arrays under keys (one key per Parameter)::

    kv = mx.kv.create('device')
    kv.init(0, weight)                 # the store's copy of key 0
    kv.push(0, [grad_on_cpu0, grad_on_cpu1])   # summed into the store
    kv.pull(0, out=[w_on_cpu0, w_on_cpu1])     # the store's value, copied to each device

With no optimizer, a push *replaces* the stored value by the sum of what was pushed; after
``kv.set_optimizer(opt)`` a push *updates* the stored value with the sum as gradient (the
parameter server's "update on the server": each key updated once, not once per device).
``pushpull`` is a push and a pull in one call. Every step is an engine op (``_copyto``
for a copy between devices, ``add_n`` for the sum, ``kv_update`` for the optimizer), so
the Gantt chart of a training step shows the copies beside the compute.

Types (``create(name)``):

* ``'local'``: the store lives on ``cpu(0)``; gradients are copied there and summed.
* ``'device'``: the store lives on the device of the first value given to ``init`` (MXNet
  sums on the GPUs; here every device is a CPU, so the two differ only in where the sum is).
* ``'dist_sync'`` / ``'dist_async'``: workers in other processes (Dask workers) share one
  store, a Dask actor (hybridlab/dask.py, NOTE [The store as a Dask actor]).
  ``dist_sync``: every push of a round waits until *all* workers pushed that key, the sum
  is applied once, and every worker pulls the same value -- so N workers compute what one
  process computes on the whole batch. ``dist_async``: each push is applied as it arrives
  (no waiting for the others); a pull returns the value as it is then, which includes the
  worker's own last push but maybe not the others' -- workers may compute on stale
  weights, and the result depends on timing.

MXNet's checks, as MXNet words them: a key pushed or pulled before ``init`` ("key 3 has
not been inited"), a key given to ``init`` twice ("duplicate init of key 3").

Gradient compression (``kv.set_gradient_compression({'type': '2bit', 'threshold': 0.5})``,
``device`` and ``dist_*`` stores, as in MXNet; ``local`` refuses it): each pushed
gradient is added to the sender's *residual* (one per key and device; per key on a dist
worker, whose devices' sum is what travels), and what is sent is the residual
thresholded to ``+threshold``, ``-threshold`` or 0 -- three values, which MXNet packs in 2
bits each -- while the rest stays in the residual for the next push (error feedback:
nothing is lost, only delayed). The receiver sums the thresholded values. hybridlab sends
them as float32 (the values are MXNet's, the bytes are not packed).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hybridlab import autograd, engine
from hybridlab import ndarray as nd
from hybridlab import optimizer as opt
from hybridlab.context import cpu
from hybridlab.errors import MXNetError
from hybridlab.ndarray_io import aligned
from hybridlab.ops import registry

TYPES = ("local", "device", "dist_sync", "dist_async")


def create(name: str = "local") -> KVStore:
    """``mx.kv.create('local' | 'device' | 'dist_sync' | 'dist_async')``."""
    if not isinstance(name, str) or name not in TYPES + ("dist", "dist_device_sync"):
        raise ValueError(f"mx.kv.create: unknown kvstore type {name!r}; hybridlab has "
                         f"{list(TYPES)} (local/device: the devices of one process; "
                         f"dist_*: Dask workers, run through hybridlab.dask.run_workers)")
    if name.startswith("dist"):
        from hybridlab import dask as _dask  # (the dask extra: only for dist_*)
        return DistKVStore("dist_async" if name == "dist_async" else "dist_sync",
                           _dask.kv_session(name))
    return KVStore(name)


class KVStore:
    """One process's store: ``init``, ``push``, ``pull``, ``pushpull``, ``set_optimizer``."""

    def __init__(self, name: str = "local") -> None:
        self.type = name
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
        for k, v in _pairs(key, value, "init"):
            if k in self._store:
                raise MXNetError(f"kvstore init: duplicate init of key {k}; each key is "
                                 f"initialised once (check for a second kv.init({k!r}, ...))")
            first = v[0] if isinstance(v, (list, tuple)) else v
            _check_array(first, "init", k)
            home = cpu(0) if self.type == "local" else first.context
            self._store[k] = first.copyto(home)

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Sum the values (one per device) of each key into the store, or update the
        stored value with the sum when an optimizer is set."""
        for k, values in _pairs(key, value, "push"):
            stored = self._stored(k, "push")
            total = self._sum(k, list(values) if isinstance(values, (list, tuple)) else [values])
            self._apply(k, total, stored)

    def pull(self, key: Any, out: Any = None, priority: int = 0,
             ignore_sparse: bool = True) -> None:
        """Copy each key's stored value into ``out`` (an NDArray, or one per device)."""
        for k, outs in _pairs(key, out, "pull"):
            self._pull_into(k, self._stored(k, "pull"), outs)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """``push`` then ``pull`` (``out=None``: into ``value`` itself)."""
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def set_optimizer(self, optimizer: Any) -> None:
        """Update on the store: each push applies ``optimizer`` to the stored value."""
        self._optimizer = opt.create(optimizer)
        self._updater = opt.Updater(self._optimizer)

    def set_gradient_compression(self, compression_params: dict) -> None:
        """MXNet's 2-bit compression of what is pushed, with error feedback (the module
        docstring); ``{'type': '2bit', 'threshold': 0.5}``, the threshold 0.5 if not given."""
        if self.type == "local":  # MXNet's check, and its words
            raise MXNetError("Gradient compression is not supported for this type of kvstore "
                             "('local'); use mx.kv.create('device') or a dist_* store")
        self._threshold = _compression_threshold(compression_params)
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
    def _stored(self, key: Any, what: str) -> nd.NDArray:
        stored = self._store.get(key)
        if stored is None:
            raise MXNetError(f"kvstore {what}: key {key} has not been inited; call "
                             f"kv.init({key!r}, value) first (known keys: {list(self._store)})")
        return stored

    def _sum(self, key: Any, values: list) -> nd.NDArray:
        """The values summed on the store's device (copies first when they are elsewhere)."""
        stored = self._store[key]
        for value in values:
            _check_array(value, "push", key)
            if value.shape != stored.shape:
                raise ValueError(f"kvstore push: key {key} holds shape {stored.shape}, "
                                 f"got a value of shape {value.shape}")
        with autograd.pause():
            if self._threshold:  # each device sends its thresholded residual
                values = [self._compressed(key, index, value)
                          for index, value in enumerate(values)]
            moved = [value.as_in_context(stored.context) for value in values]
            return moved[0] if len(moved) == 1 else nd.add_n(*moved)  # type: ignore[attr-defined]

    def _compressed(self, key: Any, index: int, grad: nd.NDArray) -> nd.NDArray:
        """One engine op on the gradient's device: the residual plus ``grad``, thresholded
        (the result), and what is left of it (the residual's next value)."""
        residual = self._residuals.get((key, index))
        if residual is None or residual.shape != grad.shape:
            residual = nd.from_numpy(np.zeros(grad.shape, grad.dtype), grad.context)
            self._residuals[(key, index)] = residual
        sent = nd.empty_like_aval(grad._aval, grad.context)
        threshold = self._threshold

        def quantize() -> None:
            sent._data, residual._data = quantize_2bit(grad._data, residual._data, threshold)  # type: ignore[arg-type]  # (computed: the engine ran their writers)

        engine.current().push(quantize, [grad._var, residual._var], [sent._var, residual._var],
                              "_quantize_2bit", grad.context)
        return sent

    def _apply(self, key: Any, total: nd.NDArray, stored: nd.NDArray) -> None:
        if self._updater is None:
            nd._assign(stored, total)  # no optimizer: the sum replaces the value
        else:
            self._updater(key, total, stored)

    def _pull_into(self, key: Any, stored: nd.NDArray, outs: Any) -> None:
        for target in outs if isinstance(outs, (list, tuple)) else [outs]:
            _check_array(target, "pull", key)
            with autograd.pause():
                nd._apply(registry.get("_copyto"), [stored], {"out": target})


class DistKVStore(KVStore):
    """A store shared by the workers of a Dask cluster (``dist_sync``, ``dist_async``).

    Each worker process sums its own devices' values first (as ``local`` does), then sends
    the sum to the store, a Dask actor (NOTE [The store as a Dask actor] in
    hybridlab/dask.py), and gets back the value after the round. The transfers run in the
    calling thread: a push waits for the engine to compute the gradient (a sync point).
    """

    def __init__(self, name: str, session: Any) -> None:
        super().__init__(name)
        self._session = session  # hybridlab.dask's: the actor, this rank, the worker count
        self._shapes: dict[Any, tuple[tuple[int, ...], np.dtype]] = {}
        self._rounds: dict[Any, int] = {}  # key -> the round this worker's last push is in

    @property
    def rank(self) -> int:
        return int(self._session.rank)

    @property
    def num_workers(self) -> int:
        return int(self._session.num_workers)

    def init(self, key: Any, value: Any) -> None:
        """Rank 0's value becomes the store's (MXNet's rule); every worker waits for it."""
        for k, v in _pairs(key, value, "init"):
            first = v[0] if isinstance(v, (list, tuple)) else v
            _check_array(first, "init", k)
            if k in self._shapes:
                raise MXNetError(f"kvstore init: duplicate init of key {k}; each key is "
                                 f"initialised once (check for a second kv.init({k!r}, ...))")
            self._shapes[k] = (first.shape, first.dtype)
            self._session.call("init", k, first.asnumpy() if self.rank == 0 else None)

    def set_optimizer(self, optimizer: Any) -> None:
        """The optimizer runs on the store (rank 0 sends it; MXNet pickled it too)."""
        chosen = opt.create(optimizer)
        if self.rank == 0:
            self._session.call("set_optimizer", chosen)
        self._session.call("barrier", "set_optimizer")

    def _set_hyper(self, name: str, value: float) -> None:
        """Sent to the store, whose optimizer is the one that updates. Every worker sends
        it, at the same step of the same script (the same value, in the same round); a
        push already applied keeps the rate it had."""
        self._session.call("set_hyper", name, opt.check_number(name, value))

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        for k, values in _pairs(key, value, "push"):
            total = self._local_sum(k, values)
            self._rounds[k] = self._session.call("push", k, total)

    def pull(self, key: Any, out: Any = None, priority: int = 0,
             ignore_sparse: bool = True) -> None:
        for k, outs in _pairs(key, out, "pull"):
            self._known(k, "pull")
            # dist_sync: the value once the round of this worker's last push is complete
            self._write(k, self._session.call("pull", k, self._rounds.get(k, 0)), outs)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """All the keys in one call to the store (one round trip, not one per key)."""
        pairs = _pairs(key, value, "pushpull")
        outs = [v for _, v in pairs] if out is None else [o for _, o in _pairs(key, out,
                                                                               "pushpull")]
        sums = [self._local_sum(k, values) for k, values in pairs]
        fresh = self._session.call("pushpull", [k for k, _ in pairs], sums)
        for (k, _), values, targets in zip(pairs, fresh, outs):
            self._write(k, values, targets)

    def _known(self, key: Any, what: str) -> tuple[tuple[int, ...], np.dtype]:
        if key not in self._shapes:
            raise MXNetError(f"kvstore {what}: key {key} has not been inited; call "
                             f"kv.init({key!r}, value) first (known keys: {list(self._shapes)})")
        return self._shapes[key]

    def _local_sum(self, key: Any, values: Any) -> np.ndarray:
        shape, _ = self._known(key, "push")
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        for value in values:
            _check_array(value, "push", key)
            if value.shape != shape:
                raise ValueError(f"kvstore push: key {key} holds shape {shape}, got a value "
                                 f"of shape {value.shape}")
        with autograd.pause():
            moved = [value.as_in_context(values[0].context) for value in values]
            total = moved[0] if len(moved) == 1 else nd.add_n(*moved)  # type: ignore[attr-defined]
        summed = total.asnumpy()  # (a sync point: the gradient must exist before it travels)
        if not self._threshold:
            return summed
        residual = self._residuals.get(key)  # compressed from worker to server, as MXNet's
        sent, self._residuals[key] = quantize_2bit(
            summed, np.zeros_like(summed) if residual is None else residual, self._threshold)
        return sent

    def _write(self, key: Any, values: np.ndarray, outs: Any) -> None:
        for target in outs if isinstance(outs, (list, tuple)) else [outs]:
            _check_array(target, "pull", key)
            nd._assign(target, nd.from_numpy(aligned(values.astype(target.dtype)),
                                             target.context))


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


def _compression_threshold(params: Any) -> float:
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


def _pairs(key: Any, value: Any, what: str) -> list[tuple[Any, Any]]:
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


def _check_array(value: Any, what: str, key: Any) -> None:
    if not isinstance(value, nd.NDArray):
        raise TypeError(f"kvstore {what}: key {key} needs NDArrays, got "
                        f"{type(value).__name__}; wrap values with nd.array(...)")
