"""The list scheduler, work and span, and the task graphs the schedule explorer plays with.

What this module teaches
------------------------
Two numbers decide how fast a task graph can run. The *work* ``W`` is the sum of all
durations: one worker needs exactly that long. The *span* ``S`` is the longest chain of
dependent tasks (the *critical path*): no number of workers beats it. The *makespan*
``T_k`` is how long a schedule on ``k`` workers takes from the first start to the last
end, a wall-clock time. A *list scheduler* -- the engine, or :func:`simulate` -- never
idles while a task is ready, and then Brent's bounds hold::

    max(W / k, S)  <=  T_k  <=  W / k + S

so adding workers helps until ``W / k`` falls below ``S``, and nothing helps after.
:func:`simulate` replays tasks with their dependencies on ``k`` imaginary workers (or on
typed pools: cpu workers beside one stream per device and a copy stream), so a lesson can
ask "what if there were 4 workers?" on a 2-core machine. :class:`TaskGraph` holds a
graph of tasks (from an engine's queue or trace, a Symbol, or a dict);
:class:`ScheduleModel` is the schedule explorer's state and every number it shows.

Invariants
----------
* Simulated schedules are :class:`~hybridlab.engine.TaskRecord` s, as the engine's trace
  is, so one Gantt renderer draws both.
* Deterministic: ties between ready tasks go to the longest remaining path, then the
  lowest index; a free worker with the lowest number takes it.
"""

from __future__ import annotations

import heapq
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from hybridlab.engine import Task, TaskRecord


def simulate(names: Sequence[str], deps: Sequence[Sequence[int]],
             durations: Sequence[float], workers: int | Mapping[str, int],
             devices: Sequence[str] | None = None) -> list[TaskRecord]:
    """Greedy list scheduling of ops ``0..n-1`` on ``workers`` identical workers.

    Op ``i`` takes ``durations[i]`` and may start once the ops ``deps[i]`` are done. The
    schedule is *work-conserving*: whenever a worker is free and an op is ready, the op
    starts. When several ops are ready, the one with the longest path to the end of the
    program (its own duration plus its longest chain of dependents: the *bottom level*)
    goes first, then the lowest index; a free worker with the lowest number takes it. So
    the schedule is deterministic, and within Brent's bounds (module docstring). Returns one
    TaskRecord per op, in op order (times in the durations' unit).
    O((ops + dependencies) log ops): 10 000 ops take a fraction of a second.

    *Typed workers*: with ``workers={"cpu": 2, "gpu": 1, "copy": 1}`` and ``devices[i]``
    naming the kind of worker op ``i`` needs, each kind is its own pool, numbered in the
    mapping's order (cpu 0-1, gpu 2, copy 3). The rule is the same within each pool: a
    worker never idles while an op of its kind is ready. (Brent's bounds are for identical
    workers; a typed schedule still never runs two ops on one worker at once.)
    """
    pools, kinds = _pools_and_kinds(names, deps, durations, workers, devices)
    order, dependents = topological_order(names, deps)
    bottom = [0.0] * len(names)  # the longest path from each op to the end, its own included
    for i in reversed(order):
        bottom[i] = durations[i] + max((bottom[j] for j in dependents[i]), default=0.0)
    start, worker_of = _list_schedule(deps, durations, kinds, pools, dependents, bottom)
    return [TaskRecord(names[i], worker_of[i], start[i], start[i] + durations[i], (), ())
            for i in range(len(names))]


def _pools_and_kinds(names: Sequence[str], deps: Sequence[Sequence[int]],
                     durations: Sequence[float], workers: int | Mapping[str, int],
                     devices: Sequence[str] | None) -> tuple[dict[str, int], list[str]]:
    """The worker pools (kind -> count; one kind "" for identical workers) and the kind
    each op needs, checked against each other and against the ops."""
    n = len(names)
    pools = dict(workers) if isinstance(workers, Mapping) else {"": workers}
    if isinstance(workers, Mapping) and devices is None:
        raise ValueError("simulate: typed workers need devices=[the kind of each op]")
    if any(not isinstance(k, int) or k < 1 for k in pools.values()):
        raise ValueError(f"simulate needs at least one worker of each kind, got {workers}")
    kinds = [""] * n if not isinstance(workers, Mapping) else list(devices or ())
    if not len(deps) == len(durations) == len(kinds) == n:
        raise ValueError(f"simulate: {n} names, {len(deps)} dependency lists, "
                         f"{len(durations)} durations and {len(kinds)} devices: give one of "
                         f"each per op")
    if set(kinds) - set(pools):
        raise ValueError(f"simulate: ops need devices {sorted(set(kinds) - set(pools))} "
                         f"that have no workers (workers={workers})")
    if any(d < 0 for d in durations):
        raise ValueError("simulate: durations must be >= 0")
    return pools, kinds


def _list_schedule(deps: Sequence[Sequence[int]], durations: Sequence[float],
                   kinds: list[str], pools: dict[str, int], dependents: list[list[int]],
                   bottom: list[float]) -> tuple[list[float], list[int]]:
    """Each op's start and worker: the event loop of :func:`simulate`."""
    n = len(kinds)
    waiting = [len(set(d)) for d in deps]
    ready: dict[str, list[tuple[float, int]]] = {kind: [] for kind in pools}
    for i in (i for i in range(n) if waiting[i] == 0):
        heapq.heappush(ready[kinds[i]], (-bottom[i], i))
    numbers = iter(range(sum(pools.values())))  # per kind, a heap of free worker numbers
    idle = {kind: [next(numbers) for _ in range(count)] for kind, count in pools.items()}
    running: list[tuple[float, int, int]] = []  # (end, op, worker)
    start, worker_of = [0.0] * n, [0] * n
    now = 0.0
    while running or any(ready.values()):
        for kind, queue in ready.items():  # work-conserving: nothing ready waits beside
            free = idle[kind]              # a free worker of its kind
            while queue and free:
                _, op = heapq.heappop(queue)
                start[op], worker_of[op] = now, heapq.heappop(free)
                heapq.heappush(running, (now + durations[op], op, worker_of[op]))
        now = running[0][0]
        while running and running[0][0] == now:  # everything finishing now frees together
            _, op, worker = heapq.heappop(running)
            heapq.heappush(idle[kinds[op]], worker)
            for dependent in dependents[op]:
                waiting[dependent] -= 1
                if waiting[dependent] == 0:
                    heapq.heappush(ready[kinds[dependent]], (-bottom[dependent], dependent))
    return start, worker_of


def topological_order(names: Sequence[str], deps: Sequence[Sequence[int]]
                       ) -> tuple[list[int], list[list[int]]]:
    """A topological order of the ops, and each op's dependents; raises on a cycle or on a
    dependency that names no op."""
    n = len(names)
    dependents: list[list[int]] = [[] for _ in range(n)]
    for i, needs in enumerate(deps):
        for d in set(needs):
            if not 0 <= d < n or d == i:
                raise ValueError(f"op {i} ({names[i]}) depends on {d}, which is "
                                 f"{'itself' if d == i else 'not an op'}")
            dependents[d].append(i)
    waiting = [len(set(d)) for d in deps]
    order = [i for i in range(n) if waiting[i] == 0]
    for op in order:  # Kahn's algorithm: ``order`` grows while it is walked
        for dependent in dependents[op]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                order.append(dependent)
    if len(order) < n:
        stuck = sorted(set(range(n)) - set(order))[:5]
        raise ValueError(f"simulate: the dependencies form a cycle (ops {stuck} never become "
                         f"ready)")
    return order, dependents


def work_and_span(deps: Sequence[Sequence[int]], durations: Sequence[float]
                  ) -> tuple[float, float]:
    """(work, span): the total duration, and the longest chain of dependent ops."""
    order, _ = topological_order([str(i) for i in range(len(deps))], deps)
    finish = [0.0] * len(deps)
    for i in order:
        finish[i] = durations[i] + max((finish[d] for d in deps[i]), default=0.0)
    return float(sum(durations)), max(finish, default=0.0)


def describe(records: Sequence[TaskRecord]) -> str:
    """One line: how many ops, on how many workers, the makespan (first start to last end,
    wall-clock) and how busy the workers were."""
    if not records:
        return "no ops recorded (turn tracing on with engine.set_tracing(True))"
    workers = {r.worker for r in records}
    makespan = max(r.end for r in records) - min(r.start for r in records)
    busy = (sum(r.end - r.start for r in records) / (makespan * len(workers))
            if makespan > 0 else 1.0)
    return (f"{len(records)} ops on {len(workers)} worker(s): makespan {makespan * 1e3:.3f} "
            f"ms, workers busy {busy:.0%} of it")


SUMS = ("broadcast_add", "elemwise_add", "_plus", "add")  # what the reduction switch rebalances


@dataclass
class TaskGraph:
    """Tasks ``0..n-1``: a name (the operator), the tasks each depends on, a duration
    (seconds, or any unit) for the *measured* cost model when one is known, and the kind of
    device each task runs on when the graph says (``"cpu"``, ``"gpu"``, ``"copy"``, ...)."""

    names: list[str]
    deps: list[list[int]]
    measured: list[float] | None = None
    notes: list[str] = field(default_factory=list)
    devices: list[str] | None = None
    unit: str = "units"  # of ``measured``: seconds for a trace's

    @classmethod
    def from_tasks(cls, tasks: Sequence[Task | TaskRecord]) -> TaskGraph:
        """From a StepEngine's tasks or an engine trace's records (their ``seq`` and
        ``deps``; dependencies on tasks outside the list are dropped)."""
        ordered = sorted(tasks, key=lambda t: t.seq)
        index = {t.seq: i for i, t in enumerate(ordered)}
        if len(index) < len(ordered) or -1 in index:
            raise ValueError("from_tasks needs tasks with distinct push numbers (seq): an "
                             "engine's tasks, or the records of a traced engine")
        deps = [sorted({index[d.seq] for d in t.deps if d.seq in index}) for t in ordered]
        records = [t for t in ordered if isinstance(t, TaskRecord)]
        measured = [r.end - r.start for r in records] if len(records) == len(ordered) else None
        return cls([t.name for t in ordered], deps, measured, unit="s")

    @classmethod
    def from_dict(cls, tasks: dict[str, tuple[Any, ...]]) -> TaskGraph:
        """From ``{name: (duration, [names it depends on])}`` (listed in any order), or
        ``{name: (duration, [names], device)}`` to bind each task to a kind of device."""
        names = list(tasks)
        shapes = {len(spec) if isinstance(spec, (tuple, list)) else 0
                  for spec in tasks.values()}
        if not shapes <= {2, 3} or len(shapes) > 1:
            raise ValueError("from_dict: give every task as (duration, [dependencies]) or "
                             "every task as (duration, [dependencies], device)")
        unknown = {d for spec in tasks.values() for d in spec[1]} - set(names)
        if unknown:
            raise ValueError(f"from_dict: dependencies on unknown tasks {sorted(unknown)}")
        return cls(names, [[names.index(d) for d in spec[1]] for spec in tasks.values()],
                   [float(spec[0]) for spec in tasks.values()],
                   devices=[str(spec[2]) for spec in tasks.values()] if shapes == {3} else None)

    @classmethod
    def from_graph(cls, source: Any) -> TaskGraph:
        """One task per operator node of a Symbol or a graph IR (``Graph``), depending on
        the operator nodes it reads (inputs and constants are not tasks)."""
        from hybridlab.graph.ir import Graph

        graph = source.to_graph() if hasattr(source, "to_graph") else source
        if not isinstance(graph, Graph):
            raise TypeError(f"from_graph takes a Symbol or a graph IR, not "
                            f"{type(source).__name__}")
        calls = [node for node in graph.nodes if node.kind == "call"]
        index = {id(node): i for i, node in enumerate(calls)}
        return cls([str(node.op) for node in calls],
                   [sorted({index[id(v.node)] for v in node.inputs if id(v.node) in index})
                    for node in calls])

    def as_tree_reductions(self) -> TaskGraph:
        """The same graph with every chain of additions rebalanced into a tree.

        A chain is a run of sums where each one's only user is the next sum; its leaves
        (everything the chain adds up) are then added pairwise, level by level.
        """
        users: list[list[int]] = [[] for _ in self.names]
        for i, needs in enumerate(self.deps):
            for d in needs:
                users[d].append(i)
        is_sum = [name in SUMS and len(set(d)) == 2 for name, d in zip(self.names, self.deps)]
        deps = [list(d) for d in self.deps]
        for top in range(len(self.names)):  # the last sum of each chain: no sum uses it
            if not is_sum[top] or any(is_sum[u] for u in users[top]):
                continue
            sums, leaves, todo = [], [], [top]  # type: ignore[var-annotated]
            while todo:  # a sum whose only user is a sum of the chain belongs to the chain
                node = todo.pop()
                sums.append(node)
                for d in deps[node]:
                    (todo if is_sum[d] and users[d] == [node] else leaves).append(d)
            if len(leaves) < 3:
                continue  # nothing to gain
            queue = sorted(leaves)  # first in, first out: pairs, then pairs of pairs ...
            for node in sorted(sums):  # ... reusing the chain's own sums (top comes last)
                deps[node], queue = queue[:2], queue[2:] + [node]
        return TaskGraph(list(self.names), deps, list(self.measured) if self.measured else None,
                         ["additions rebalanced as trees"], self.devices, self.unit)


STREAMS = {  # the explorer's device settings, for graphs whose tasks name devices
    "identical": "identical workers (devices ignored)",
    "typed": "typed: cpu workers, one stream per device, copies on their own stream",
    "serialised": "typed, but copies share the compute stream (no overlap)",
}


class ScheduleModel:
    """A task graph and the explorer's settings; every number the view shows.

    ``cost``: ``"uniform"`` (one unit per task), ``"measured"`` (the trace's durations) or
    ``"per operator"`` (one cost per operator name: ``op_costs``, or the median measured
    duration of each operator). ``streams`` (for graphs whose tasks name devices, see
    :data:`STREAMS`): ``workers`` is then the number of cpu workers, beside one stream per
    other device.
    """

    def __init__(self, graph: TaskGraph, workers: int = 2, cost: str = "uniform",
                 tree: bool = False, op_costs: dict[str, float] | None = None,
                 streams: str = "identical") -> None:
        self.graph, self.workers, self.cost, self.tree = graph, workers, cost, tree
        self.op_costs, self.streams = op_costs, streams
        self.arrows, self.critical = True, True
        self._schedules: dict[tuple[Any, ...], list[TaskRecord]] = {}
        if cost not in self.costs():
            raise ValueError(f"cost={cost!r}: this graph offers {self.costs()}")
        if streams not in self.stream_options():
            raise ValueError(f"streams={streams!r}: this graph offers {self.stream_options()}"
                             + ("" if self.graph.devices else " (its tasks name no devices)"))

    def costs(self) -> list[str]:
        per_op = ["per operator"] if self.op_costs or self.graph.measured else []
        return ["uniform"] + (["measured"] if self.graph.measured else []) + per_op

    def distinct_costs(self) -> list[str]:
        """The cost models that give this graph different durations (the model in use
        always among them): a choice between two identical schedules is no choice."""
        kept: list[str] = []
        seen: list[list[float]] = []
        for cost in self.costs():
            durations = ScheduleModel(self.graph, cost=cost, op_costs=self.op_costs
                                      ).durations(self.graph)
            if durations not in seen or cost == self.cost:
                kept.append(cost)
                seen.append(durations)
        return kept

    def tree_matters(self) -> bool:
        """Whether rebalancing the sums changes this graph (some chain of three or more
        additions): otherwise the chain/tree switch would change nothing drawn."""
        return self.graph.as_tree_reductions().deps != self.graph.deps

    def stream_options(self) -> list[str]:
        return list(STREAMS) if self.graph.devices else ["identical"]

    def current(self) -> TaskGraph:
        return self.graph.as_tree_reductions() if self.tree else self.graph

    def durations(self, graph: TaskGraph) -> list[float]:
        if self.cost == "measured":
            if not graph.measured:
                raise ValueError("this graph has no measured durations: use cost='uniform'")
            return graph.measured
        if self.cost == "per operator":
            table = self.op_costs or _median_by_name(graph)
            missing = sorted(set(graph.names) - set(table))
            if missing:
                raise ValueError(f"op_costs gives no cost for {missing}: add them")
            return [float(table[name]) for name in graph.names]
        return [1.0] * len(graph.names)

    def pools(self, workers: int | None = None) -> int | dict[str, int]:
        """The workers: ``k`` identical ones, or ``{"cpu": k, <each device>: 1}``."""
        k = workers or self.workers
        if self.streams == "identical":
            return k
        return {"cpu": k, **{d: 1 for d in self._devices() if d != "cpu"}}

    def row_names(self) -> list[str]:
        pools = self.pools()
        if isinstance(pools, int):
            return [f"worker {w}" for w in range(pools)]
        return [f"{kind} {i}" if count > 1 else kind
                for kind, count in pools.items() for i in range(count)]

    def _devices(self) -> list[str]:
        """Each task's device under the setting: copies on the compute stream if serialised."""
        devices = list(self.graph.devices or [])
        if self.streams == "serialised":
            compute = next((d for d in devices if d not in ("cpu", "copy")), "cpu")
            devices = [compute if d == "copy" else d for d in devices]
        return devices

    def schedule(self, workers: int | None = None) -> list[TaskRecord]:
        """The list schedule on ``workers`` (default: the model's), kept per setting: a
        redraw asks for the same schedules again (the curve, the bounds, the chart)."""
        key = (self.cost, self.tree, self.streams, workers or self.workers)
        if key not in self._schedules:
            graph = self.current()
            pools = self.pools(workers)
            self._schedules[key] = simulate(graph.names, graph.deps, self.durations(graph),
                                            pools,
                                            None if isinstance(pools, int) else self._devices())
        return self._schedules[key]

    def numbers(self) -> dict[str, float]:
        """work, span, the makespan, and the bounds every list schedule keeps: Brent's
        ``max(W/k, S) <= T <= W/k + S``; with typed workers, per pool ``d`` of ``k_d``
        workers doing work ``W_d``: ``max(S, max W_d/k_d) <= T <= S + sum W_d/k_d``."""
        graph = self.current()
        durations = self.durations(graph)
        work, span = work_and_span(graph.deps, durations)
        makespan = max((r.end for r in self.schedule()), default=0.0)
        pools = self.pools()
        if isinstance(pools, int):
            shares = [work / pools]
        else:
            devices = self._devices()
            shares = [sum(t for t, d in zip(durations, devices) if d == kind) / count
                      for kind, count in pools.items()]
        return {"work": work, "span": span, "makespan": makespan,
                "lower": max([span, *shares]), "upper": span + sum(shares)}

    def critical_path(self) -> list[int]:
        """Task indices of one longest chain (the first found, deterministic)."""
        graph = self.current()
        durations = self.durations(graph)
        finish, best = [0.0] * len(graph.names), [-1] * len(graph.names)
        for i in _order(graph):
            for d in graph.deps[i]:
                if finish[d] > finish[i]:
                    finish[i], best[i] = finish[d], d
            finish[i] += durations[i]
        path, node = [], max(range(len(finish)), key=lambda i: (finish[i], -i), default=-1)
        while node != -1:
            path.append(node)
            node = best[node]
        return path[::-1]

    def speedups(self, up_to: int = 16) -> list[tuple[int, float]]:
        """(k, T_1 / T_k) for k = 1 .. up_to (cpu) workers."""
        times = [max(r.end for r in self.schedule(k)) for k in range(1, up_to + 1)]
        return [(k, times[0] / t) for k, t in enumerate(times, start=1)]

    def summary(self) -> str:
        n, graph = self.numbers(), self.current()
        unit = graph.unit if self.cost != "uniform" else "units"
        where = (f"{self.workers} worker(s)" if self.streams == "identical" else
                 f"{', '.join(self.row_names())} ({self.streams})")
        bound = "Brent" if self.streams == "identical" else "bounds"
        return (f"{len(graph.names)} tasks on {where}, {self.cost} costs"
                f"{', tree reductions' if self.tree else ''}: work {n['work']:.4g}, span "
                f"{n['span']:.4g}, makespan {n['makespan']:.4g} {unit}; {bound}: "
                f"{n['lower']:.4g} <= T <= {n['upper']:.4g}")


def _median_by_name(graph: TaskGraph) -> dict[str, float]:
    """Each operator's median measured duration: one cost per operator name."""
    if not graph.measured:
        raise ValueError("per-operator costs need op_costs={name: cost} or a measured trace")
    by_name: dict[str, list[float]] = {}
    for name, t in zip(graph.names, graph.measured):
        by_name.setdefault(name, []).append(t)
    return {name: statistics.median(ts) for name, ts in by_name.items()}


def _order(graph: TaskGraph) -> list[int]:
    return topological_order(graph.names, graph.deps)[0]
