"""The server's half of ``dist_sync`` / ``dist_async``: one Dask actor holds the store.

What this module teaches
------------------------
MXNet's distributed kvstore runs *server* processes that hold the weights and *workers*
that push gradients and pull weights. Here the workers are Dask workers running one
training function each (:func:`run_workers`: ranks 0..n-1, each finding its
:class:`KVSession` when it calls ``mx.kv.create('dist_sync')``), and the server is one
:class:`KVServer`, a Dask actor on the first worker. A round of a key ends when every rank
pushed it, waits time out (a lost worker is an error, not a hang), and a failed rank
aborts the others' waits.

``dask`` and ``distributed`` are an optional extra (``pip install -e '.[dask]'``),
imported inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, NamedTuple

import numpy as np

from hybridlab.errors import MXNetError

# NOTE: [The store as a Dask actor] MXNet's distributed kvstore has *server* processes that
# hold the weights and *workers* that push gradients and pull weights, over its own network
# layer (ps-lite). On Dask the workers are Dask worker processes running the training
# function (``run_workers``), and the server is one **Dask actor**: an object that lives on
# one worker and whose methods the others call through the scheduler-free worker-to-worker
# connection (``client.submit(KVServer, ..., actor=True)``). Why an actor and not Dask's
# other primitives:
# * the store is *state that changes every step* (the weights, the optimizer's momentum);
#   tasks and the scheduler's data exchange (``scatter``/``gather``, futures) move
#   immutable results, so a step would make new futures and a scheduler round trip for each
#   key, and the optimizer's state would have nowhere to live;
# * ``Queue``/``Variable`` go through the scheduler for every message (a hop more than the
#   actor's direct call) and have no "wait until all N workers have pushed" -- a barrier
#   would have to be built from polling;
# * an actor's ``async`` methods run on its worker's event loop, one at a time between
#   ``await`` points: the sum of a round needs no lock, and "wait until every worker has
#   pushed this key" is an ``asyncio.Condition`` -- the barrier that makes ``dist_sync``
#   synchronous, with a timeout so that a lost worker becomes an error, not a hang.
# The cost is the one a parameter server has: every gradient goes to one process and every
# weight comes back from it (lab/allreduce.py models it against the ring and the tree).


class KVServer:
    """The shared store: ``{key: numpy array}``, an optimizer, and the rounds of each key.

    ``dist_sync`` (``push(..., sync=True)``): a round of a key ends when all
    ``num_workers`` pushed it; the sum is applied once (the optimizer's update, or it
    replaces the value), and a pull of that round waits for its end. ``dist_async``: a push
    is applied when it arrives, a pull returns the value as it is.
    """

    def __init__(self, num_workers: int, timeout: float) -> None:
        self.num_workers, self.timeout = num_workers, timeout
        self.values: dict[Any, np.ndarray] = {}
        self.optimizer: Any = None
        self.sums: dict[Any, tuple[np.ndarray, int]] = {}  # key -> (partial sum, pushes)
        self.rounds: dict[Any, int] = {}  # key -> rounds completed
        self.arrived: dict[str, int] = {}  # barrier name -> arrivals
        self.failure = ""  # set by abort(): every wait raises it
        self._changed: Any = None  # an asyncio.Condition, made on the event loop

    async def init(self, key: Any, value: np.ndarray | None) -> None:
        """Rank 0 gives the value; the others wait for it."""
        if value is not None:
            self.values[key] = value
            self.rounds[key] = 0
            await self._notify()
        await self._wait(lambda: key in self.values, f"the value of key {key!r} from rank 0")

    async def set_optimizer(self, optimizer: Any) -> None:
        self.optimizer = optimizer

    async def set_hyper(self, name: str, value: float) -> None:
        """A new learning rate or ``rescale_grad`` for the optimizer on the store (its
        states kept): the pushes that arrive from now on are applied with it."""
        if self.optimizer is None:
            raise RuntimeError(f"the store has no optimizer, so it has no {name} to set; "
                               f"call kv.set_optimizer(...) first")
        self.optimizer.hyper[name] = value

    async def barrier(self, name: str) -> None:
        """Wait until every worker reached ``name`` (used once per name)."""
        self.arrived[name] = self.arrived.get(name, 0) + 1
        await self._notify()
        await self._wait(lambda: self.arrived[name] >= self.num_workers,
                         f"all {self.num_workers} workers at {name}")

    async def push(self, key: Any, grad: np.ndarray, sync: bool = True) -> int:
        """Add ``grad`` to the key's round; returns the round a pull must wait for."""
        if self.failure:
            raise RuntimeError(self.failure)
        if not sync:
            self._apply(key, grad)
            return self.rounds[key]
        total, count = self.sums.get(key, (None, 0))
        total = grad.copy() if total is None else total + grad
        target = self.rounds[key] + 1
        if count + 1 == self.num_workers:  # the last push of the round: apply the sum once
            self.sums.pop(key, None)
            self._apply(key, total)
            await self._notify()
        else:
            self.sums[key] = (total, count + 1)
        return target

    async def pull(self, key: Any, after: int = 0) -> np.ndarray:
        """The value once round ``after`` of ``key`` is complete."""
        await self._wait(lambda: self.rounds[key] >= after,
                         f"the other workers' push of key {key!r} (round {after})")
        return self.values[key]

    async def pushpull(self, keys: list, grads: list, sync: bool = True) -> list[np.ndarray]:
        """Push every key's gradient, then pull each: one message each way for all keys."""
        rounds = [await self.push(key, grad, sync) for key, grad in zip(keys, grads)]
        return [await self.pull(key, after) for key, after in zip(keys, rounds)]

    async def abort(self, reason: str) -> None:
        """A worker failed: every wait (now and later) raises ``reason``."""
        self.failure = reason
        await self._notify()

    def _apply(self, key: Any, total: np.ndarray) -> None:
        value = self.values[key]
        self.values[key] = (total.astype(value.dtype) if self.optimizer is None
                            else self.optimizer.apply(key, value, total))
        self.rounds[key] += 1

    async def _notify(self) -> None:
        condition = self._condition()
        async with condition:
            condition.notify_all()

    async def _wait(self, ready: Any, what: str) -> None:
        import asyncio

        condition = self._condition()
        async with condition:
            try:
                await asyncio.wait_for(condition.wait_for(lambda: ready() or self.failure),
                                       self.timeout)
            except TimeoutError:
                raise TimeoutError(f"the store waited {self.timeout:g} s for {what}: a worker "
                                   f"was lost or stopped calling the kvstore") from None
        if self.failure:
            raise RuntimeError(self.failure)

    def _condition(self) -> Any:
        import asyncio

        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed


class KVSession(NamedTuple):
    """What ``mx.kv.create('dist_sync')`` finds on a worker started by :func:`run_workers`."""

    server: Any  # the KVServer actor's handle
    rank: int
    num_workers: int
    timeout: float
    sync: bool = True

    def call(self, method: str, *args: Any) -> Any:
        """Call the store and wait; its errors become MXNetErrors naming the call."""
        if method in ("push", "pushpull"):
            args = (*args, self.sync)
        try:
            return getattr(self.server, method)(*args).result(timeout=self.timeout + 30)
        except Exception as err:  # the store's TimeoutError/RuntimeError, or Dask's own
            raise MXNetError(f"kvstore {method} (rank {self.rank} of {self.num_workers}): "
                             f"{err}") from err


_SESSIONS: dict[int, KVSession] = {}  # thread id -> the session of the rank it runs


def kv_session(name: str) -> KVSession:
    """The store session of the rank running in this thread (``kvstore.create``)."""
    session = _SESSIONS.get(threading.get_ident())
    if session is None:
        raise MXNetError(f"mx.kv.create({name!r}) runs inside a function started on every "
                         f"Dask worker by hybridlab.kvstore.run_workers(fn, client=...); "
                         f"here there are no other workers to share a store with")
    return session._replace(sync=name != "dist_async")


def run_workers(fn: Any, *args: Any, client: Any, timeout: float = 60.0) -> list[Any]:
    """Run ``fn(*args)`` once on every worker of ``client``'s cluster, as ranks 0..n-1 that
    share one store (``mx.kv.create('dist_sync')`` inside ``fn``); the results by rank.

    The store is a :class:`KVServer` actor on the first worker (NOTE [The store as a Dask
    actor]). When a rank fails, the store is told at once, so the other ranks' waits raise
    instead of waiting out ``timeout``; the first failure is raised here.
    """
    from distributed import wait

    workers = sorted(client.scheduler_info()["workers"])
    if not workers:
        raise ValueError("run_workers: the cluster has no workers yet; wait for them "
                         "(client.wait_for_workers(n)) first")
    server = client.submit(KVServer, len(workers), timeout, actor=True, workers=workers[:1],
                           pure=False).result()
    futures = [client.submit(_run_rank, fn, server, rank, len(workers), timeout, args,
                             workers=[address], pure=False, allow_other_workers=False)
               for rank, address in enumerate(workers)]
    pending = futures
    while pending:
        done, still = wait(pending, return_when="FIRST_COMPLETED")
        pending = list(still)
        failed = [f for f in done if f.status == "error"]
        if failed:
            rank = futures.index(failed[0])
            server.abort(f"rank {rank} failed: {failed[0].exception()!r}").result()
            # the others raise at their next store call, now -- unless their worker died,
            # and Dask waits for it to come back: give up on them after the timeout
            with contextlib.suppress(TimeoutError):
                wait(pending, timeout=timeout)
            client.cancel(pending)
            failed[0].result()  # raises the first failure
    return client.gather(futures)


def _run_rank(fn: Any, server: Any, rank: int, num_workers: int, timeout: float,
              args: tuple) -> Any:
    """On a worker: ``fn(*args)`` with this rank's store session."""
    key = threading.get_ident()
    _SESSIONS[key] = KVSession(server, rank, num_workers, timeout)
    try:
        return fn(*args)
    finally:
        del _SESSIONS[key]
