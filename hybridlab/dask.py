"""The same graph on Dask: one Dask task per operator node, scheduled by ``dask.distributed``.

What this module teaches
------------------------
hybridlab's engine and Dask's scheduler solve the same problem: run a graph of tasks,
each as soon as what it reads is ready, on as many workers as there are. The engine
finds the graph while the program runs (every push is a task); Dask is handed the whole
graph first, as a dictionary ``{key: (function, *argument keys)}``, and can then place
tasks on workers in other processes or on other machines. :func:`to_dask` writes a
hybridlab graph (a Symbol, a graph IR, or a HybridBlock traced with ``sym.var``) in that
form -- one task per operator node, each calling the node's kernel from the operator
registry -- and :func:`compute` runs it, on a ``dask.distributed`` client when given one.
:func:`stream_records` turns Dask's task stream into the engine's ``TaskRecord`` s, so
``viz.gantt`` draws both with one function.

What it costs: a distributed scheduler spends about a millisecond per task (messages
between scheduler and workers, serialising results) where the engine spends microseconds
(``benchmarks/dask_overhead.py`` measures both). A cluster pays off when each task is
long, or when the data does not fit one machine -- not for a small network's layers.

Random operators draw one generator per node that takes a ``RunContext``, in node order,
when the graph is written: the stream a CachedOp draws when it is called, so Dask's
results equal hybridized hybridlab's after the same ``mx.random.seed`` (and Dropout
under ``training=True`` drops the same elements).

``dask`` and ``distributed`` are an optional extra (``pip install -e '.[dask]'`` in the
checkout), imported inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import operator
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from hybridlab import random
from hybridlab import symbol as sym
from hybridlab.engine import TaskRecord
from hybridlab.errors import DaskGraphError
from hybridlab.graph import ir, shapes
from hybridlab.graph.passes.context import PassContext
from hybridlab.graph.passes.lower_operators import lower_operators
from hybridlab.ops import registry
from hybridlab.ops.registry import Aval, RunContext


class DaskGraph(NamedTuple):
    """A graph in Dask's form: ``graph`` (``{key: task}``), the output ``keys``, and the
    operator behind each task's key (``ops``), for drawing."""

    graph: dict[str, Any]
    keys: list[str]
    ops: dict[str, str]


def to_dask(source: Any, inputs: Mapping[str, Any] | None = None, *,
            training: bool = False) -> DaskGraph:
    """The Dask graph of ``source`` with its inputs bound.

    ``source``: a Symbol, a graph IR, or a (Hybrid)Block -- a block is traced with one input
    ``sym.var("data")`` and its parameters are bound by name. ``inputs``: ``{name: array}``
    for every graph input not bound otherwise (NDArrays or numpy arrays).
    """
    graph, bound = _graph_and_params(source)
    given = {**bound, **{k: _numpy(v) for k, v in (inputs or {}).items()}}
    names = [node.name for node in graph.inputs]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise DaskGraphError(f"to_dask: {unknown} are not inputs of this graph (its inputs: "
                             f"{names})")
    for i, node in enumerate(graph.nodes):  # every input bound, every operator runnable
        if node.kind == "var" and node.name not in given:
            raise DaskGraphError(f"to_dask: input {node.name!r} (node %{i}) is not bound: "
                                 f"pass inputs={{{node.name!r}: array}}")
        if node.kind == "call":
            _check_kernel(node, i)
    # one task per primitive operator
    graph, _ = lower_operators(graph, PassContext(training=training))
    try:  # the shapes first: a mismatch is reported here, naming the node, not in a worker
        shapes.infer_graph(graph, [Aval(given[n].shape, given[n].dtype) for n in names])
    except ValueError as error:
        raise DaskGraphError(f"to_dask: the bound inputs do not fit the graph: {error}") from None
    tasks: dict[str, Any] = {}
    ops: dict[str, str] = {}
    key_of: dict[int, str] = {}
    for i, node in enumerate(graph.nodes):
        key = key_of[id(node)] = f"{node.op or node.kind}-{i}"
        if node.kind == "var":
            tasks[key] = given[node.name]
        elif node.kind == "const":
            tasks[key] = node.value
        elif node.kind == "call":
            rng = random.next_generator() if node.opdef.needs_context else None
            args = [_input_key(v, key_of, tasks) for v in node.inputs]
            tasks[key] = (_run, node.op, node.attr_dict, node.num_outputs, training, rng, *args)
            ops[key] = str(node.op)
    keys = [_input_key(v, key_of, tasks) for v in graph.outputs]
    return DaskGraph(tasks, keys, ops)


def compute(source: Any, inputs: Mapping[str, Any] | None = None, *, client: Any = None,
            training: bool = False) -> list[Any]:
    """Run ``source`` on Dask (the threaded scheduler, or ``client``'s cluster): one NDArray
    per output, equal to hybridlab's own result."""
    from hybridlab import ndarray

    dask_graph = to_dask(source, inputs, training=training)
    if client is None:
        from dask.threaded import get

        results = get(dask_graph.graph, dask_graph.keys)
    else:
        results = client.get(dask_graph.graph, dask_graph.keys)
    return [ndarray.array(r, dtype=r.dtype) for r in results]


def local_cluster(n_workers: int = 2, *, processes: bool = False, **options: Any) -> Any:
    """A ``distributed.LocalCluster`` on this machine that never looks outward.

    One thread per worker, no dashboard, and every address on the loopback interface over
    TCP (the scheduler's small HTTP server too, on a free port: its default, 8787, is taken
    when another cluster runs on the machine, and taking another prints a warning): Dask's
    default in-process transport names itself after the machine's outward IP address,
    found by asking the route to 8.8.8.8 -- offline that prints a warning to stderr (and
    nbval fails the cell). ``processes=True`` gives each worker its own process
    (real parallelism, pickled data); the default keeps them as threads of this process.
    ``options`` go to ``LocalCluster`` unchanged.
    """
    from distributed import LocalCluster

    settings = {"n_workers": n_workers, "threads_per_worker": 1, "processes": processes,
                "host": "127.0.0.1", "protocol": "tcp://", "dashboard_address": "127.0.0.1:0",
                "worker_dashboard_address": None,
                "scheduler_kwargs": {"dashboard": False}, **options}
    return LocalCluster(**settings)


def stream_records(stream: Sequence[Mapping[str, Any]], ops: Mapping[str, str] | None = None
                   ) -> tuple[list[TaskRecord], dict[int, str]]:
    """Dask's task stream (``distributed.get_task_stream``'s ``.data``) as TaskRecords, one
    per computed task, one row per worker thread; and each row's name, for ``gantt(rows=)``.
    With ``ops`` (a :class:`DaskGraph`'s) only operator tasks are kept, named by their
    operator (inputs and constants are tasks to Dask too)."""
    computed = []  # (worker address, thread, operator, start, stop)
    for entry in stream:
        key = str(entry.get("key"))
        if ops is not None and key not in ops:
            continue
        for part in entry.get("startstops", ()):
            if part.get("action") == "compute":  # (transfers are not the graph's tasks)
                computed.append((str(entry.get("worker", "?")), entry.get("thread", 0),
                                 ops[key] if ops is not None else key.rsplit("-", 1)[0],
                                 float(part["start"]), float(part["stop"])))
    places = sorted({(address, thread) for address, thread, *_ in computed})
    workers = sorted({address for address, _ in places})
    rows = {}
    for row, (address, thread) in enumerate(places):  # "dask worker 0 thread 1"
        threads = [t for a, t in places if a == address]
        rows[row] = f"dask worker {workers.index(address)}" + (
            f" thread {threads.index(thread)}" if len(threads) > 1 else "")
    records = [TaskRecord(name, places.index((address, thread)), start, stop, (), ())
               for address, thread, name, start, stop in computed]
    return sorted(records, key=lambda r: r.start), rows


def _graph_and_params(source: Any) -> tuple[ir.Graph, dict[str, np.ndarray]]:
    if isinstance(source, ir.Graph):
        return source, {}
    if hasattr(source, "collect_params") and callable(source):  # a block: trace it
        traced = source(sym.var("data"))
        if isinstance(traced, (list, tuple)):
            traced = sym.Group(list(traced))
        params = source.collect_params()
        wanted = set(traced.list_inputs()) - {"data"}
        return traced.to_graph(), {name: _numpy(params[name].data()) for name in wanted
                                   if name in params}
    if hasattr(source, "to_graph"):
        return source.to_graph(), {}
    raise DaskGraphError(f"to_dask takes a Symbol, a graph IR or a HybridBlock, not "
                         f"{type(source).__name__}")


def _check_kernel(node: ir.Node, i: int) -> None:
    try:
        opdef = registry.get(str(node.op))
    except KeyError:
        opdef = None
    if opdef is None or opdef.kernel is None:
        raise DaskGraphError(f"to_dask: node %{i} ({node.name}) calls {node.op!r}, which has "
                             f"no kernel in the operator registry: Dask would have nothing to "
                             f"run for it")


def _input_key(value: ir.Value, key_of: dict[int, str], tasks: dict[str, Any]) -> str:
    """The key holding ``value``: the node's own, or a ``getitem`` task for output i > 0."""
    key = key_of[id(value.node)]
    if value.node.kind != "call" or value.node.num_outputs == 1:
        return key
    item = f"{key}.{value.index}"
    tasks.setdefault(item, (operator.getitem, key, value.index))
    return item


def _run(op: str, attrs: dict[str, Any], num_outputs: int, training: bool,
         rng: np.random.Generator | None, *arrays: np.ndarray) -> Any:
    """One task: the operator's kernel on numpy arrays (on any worker: looked up by name)."""
    opdef = registry.get(op)
    extra = {"rt": RunContext(training, rng)} if opdef.needs_context else {}
    result = opdef.kernel(*arrays, **attrs, **extra)
    return tuple(result) if num_outputs > 1 else np.asarray(result)


def _numpy(value: Any) -> np.ndarray:
    return value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value)


# --- the key-value store of dist_sync / dist_async (hybridlab/kvstore.py) -------------------
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
                            else self.optimizer.update(key, value, total))
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
        from hybridlab.errors import MXNetError

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
    import threading

    session = _SESSIONS.get(threading.get_ident())
    if session is None:
        from hybridlab.errors import MXNetError

        raise MXNetError(f"mx.kv.create({name!r}) runs inside a function started on every "
                         f"Dask worker by hybridlab.dask.run_workers(fn, client=...); here "
                         f"there are no other workers to share a store with")
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
    import threading

    key = threading.get_ident()
    _SESSIONS[key] = KVSession(server, rank, num_workers, timeout)
    try:
        return fn(*args)
    finally:
        del _SESSIONS[key]
