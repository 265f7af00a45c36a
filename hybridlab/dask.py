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

import operator
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from hybridlab import random
from hybridlab import symbol as sym
from hybridlab.engine import TaskRecord
from hybridlab.errors import DaskGraphError
from hybridlab.graph import ir, shapes
from hybridlab.graph.passes import PassContext, lower_operators
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
    graph = lower_operators(graph, PassContext(training=training)).graph
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
