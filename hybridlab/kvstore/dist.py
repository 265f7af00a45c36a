"""The worker's half of ``dist_sync`` / ``dist_async``: a store shared by Dask workers.

What this module teaches
------------------------
Workers in other processes (Dask workers, started by :func:`hybridlab.kvstore.run_workers`)
share one store, whose server half is a Dask actor (server.py, NOTE [The store as a Dask
actor]). Each worker sums its own devices' values first (as ``local`` does), then sends
the sum to the server and gets back the value after the round.

* ``dist_sync``: every push of a round waits until *all* workers pushed that key, the sum
  is applied once, and every worker pulls the same value -- so N workers compute what one
  process computes on the whole batch.
* ``dist_async``: each push is applied as it arrives (no waiting for the others); a pull
  returns the value as it is then, which includes the worker's own last push but maybe
  not the others' -- workers may compute on stale weights, and the result depends on
  timing.

The transfers run in the calling thread: a push waits for the engine to compute the
gradient (a sync point: the gradient travels as numpy), and ``pushpull`` sends all the
keys of a ``Trainer.step`` in one call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab import autograd
from hybridlab import ndarray as nd
from hybridlab import optimizer as opt
from hybridlab.kvstore.compression import quantize_2bit
from hybridlab.kvstore.local import KVStore, arrays, first_value, key_value_pairs, known, summed
from hybridlab.ndarray_io import aligned


class DistKVStore(KVStore):
    """A store shared by the workers of a Dask cluster (``dist_sync``, ``dist_async``)."""

    def __init__(self, name: str, session: Any) -> None:
        super().__init__(name)
        self._session = session  # server.py's KVSession: the actor, this rank, the count
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
        for k, v in key_value_pairs(key, value, "init"):
            first = first_value(k, v, known=self._shapes)
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
        for k, values in key_value_pairs(key, value, "push"):
            total = self._local_sum(k, values)
            self._rounds[k] = self._session.call("push", k, total)

    def pull(self, key: Any, out: Any = None, priority: int = 0,
             ignore_sparse: bool = True) -> None:
        for k, outs in key_value_pairs(key, out, "pull"):
            known(self._shapes, k, "pull")
            # dist_sync: the value once the round of this worker's last push is complete
            self._write(k, self._session.call("pull", k, self._rounds.get(k, 0)), outs)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """All the keys in one call to the store (one round trip, not one per key)."""
        pairs = key_value_pairs(key, value, "pushpull")
        outs = pairs if out is None else key_value_pairs(key, out, "pushpull")
        sums = [self._local_sum(k, values) for k, values in pairs]
        fresh = self._session.call("pushpull", [k for k, _ in pairs], sums)
        for (k, _), values, (_, targets) in zip(pairs, fresh, outs):
            self._write(k, values, targets)

    def _local_sum(self, key: Any, values: Any) -> np.ndarray:
        """This worker's devices' sum, as numpy (compressed when compression is on)."""
        values = arrays(key, values, "push", known(self._shapes, key, "push")[0])
        with autograd.pause():
            total = summed(values, values[0].context)
        local = total.asnumpy()  # (a sync point: the gradient must exist before it travels)
        if not self._threshold:
            return local
        residual = self._residuals.get(key)  # compressed from worker to server, as MXNet's
        sent, self._residuals[key] = quantize_2bit(
            local, np.zeros_like(local) if residual is None else residual, self._threshold)
        return sent

    def _write(self, key: Any, values: np.ndarray, outs: Any) -> None:
        for target in arrays(key, outs, "pull"):
            nd._assign(target, nd.from_numpy(aligned(values.astype(target.dtype)),
                                             target.context))
