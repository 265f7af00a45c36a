"""All-reduce, modelled: a parameter server, a ring and a tree as task graphs of transfers.

What this module teaches
------------------------
After a data-parallel backward pass each of ``n`` devices holds a gradient of ``S``
bytes, and every device needs their sum: an *all-reduce*. How long it takes depends on
who sends what to whom, and a transfer's cost is modelled the classic way (Hockney's
*alpha-beta* model): ``alpha`` seconds of latency per message plus ``beta`` seconds per
byte. Each way is a task graph -- one task per message, bound to the network port it
occupies (a device sends one message at a time and receives one at a time) -- scheduled
by the course's list scheduler (:func:`lab.schedule.simulate`, one stream per port), and
its makespan equals a closed form (``tests/test_allreduce.py``):

* **parameter server**: every device sends its ``S`` bytes to one server, which sums
  them and sends the sum back. The server's port carries ``n`` messages in and ``n``
  out, one after the other: ``2 n (alpha + beta S)`` -- it grows with ``n``: the server
  is the bottleneck.
* **ring**: the gradient is cut into ``n`` chunks; in ``n - 1`` steps of a
  *reduce-scatter* every device sends one chunk to its right neighbour and adds the
  chunk it receives, so each device ends with one chunk fully summed; ``n - 1`` steps of
  an *all-gather* pass the summed chunks round. Every port is busy at every step:
  ``2 (n - 1) (alpha + beta S / n)``. Each device sends ``2 (n - 1) / n * S`` bytes,
  less than ``2 S`` whatever ``n``: bandwidth-optimal, but ``2 (n - 1)`` latencies.
* **tree** (binomial): ``ceil(log2 n)`` rounds in which half the remaining devices send
  their partial sum to a partner, then the same rounds backwards to broadcast:
  ``2 ceil(log2 n) (alpha + beta S)`` -- few latencies, but whole gradients each time.

So small gradients (latency-bound: ``alpha`` dominates) favour the tree, large ones
(bandwidth-bound: ``beta S`` dominates) the ring, and the server only when ``n`` is
small. :class:`AllReduceModel` is the all-reduce explorer's state (viz/allreduce.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hybridlab.engine import TaskRecord
from hybridlab.lab.schedule import TaskGraph, simulate

KINDS = ("server", "ring", "tree")
FORMULAS = {
    "server": "2 n (alpha + beta S)",
    "ring": "2 (n - 1) (alpha + beta S / n)",
    "tree": "2 ceil(log2 n) (alpha + beta S)",
}


def closed_form(kind: str) -> str:
    """The formula of ``kind``'s time, as text."""
    return f"T = {FORMULAS[_kind(kind)]}"


def predicted_time(kind: str, n: int, size: float, alpha: float, beta: float) -> float:
    """The closed form: the time of an all-reduce of ``size`` bytes over ``n`` devices."""
    _check(n, size, alpha, beta)
    if _kind(kind) == "server":
        return 2 * n * (alpha + beta * size)
    if kind == "ring":
        return 2 * (n - 1) * (alpha + beta * size / n)
    return 2 * _rounds(n) * (alpha + beta * size)


def bytes_per_device(kind: str, n: int, size: float) -> float:
    """Bytes each device sends (the server: what the server's port sends, its bottleneck)."""
    _check(n, size, 0.0, 0.0)
    if _kind(kind) == "server":
        return n * size
    if kind == "ring":
        return 2 * (n - 1) / n * size
    return _rounds(n) * size  # the root sends one whole gradient per broadcast round


def task_graph(kind: str, n: int, size: float, alpha: float, beta: float) -> TaskGraph:
    """The all-reduce as a graph of transfers: names ``"push 3>S"``, ``"rs 0>1"``...,
    durations ``alpha + beta * bytes``, each bound to the port it occupies."""
    _check(n, size, alpha, beta)
    build = {"server": _server, "ring": _ring, "tree": _tree}[_kind(kind)]
    names, deps, sizes, ports = build(n, size)
    return TaskGraph(names, deps, [alpha + beta * b for b in sizes],
                     [f"{FORMULAS[kind]}"], ports, unit="s")


@dataclass
class AllReduceModel:
    """The all-reduce explorer's state: the way, the devices, the gradient's bytes, the
    link's ``alpha`` (s per message) and ``beta`` (s per byte); every number it shows."""

    kind: str = "ring"
    n: int = 4
    size: float = 4e6
    alpha: float = 50e-6
    beta: float = 1e-9

    def graph(self) -> TaskGraph:
        return task_graph(self.kind, self.n, self.size, self.alpha, self.beta)

    def schedule(self) -> list[TaskRecord]:
        """The list schedule of the transfers, one stream per port."""
        graph = self.graph()
        ports = self.ports()
        return simulate(graph.names, graph.deps, graph.measured or [], {p: 1 for p in ports},
                        graph.devices)

    def ports(self) -> list[str]:
        """The Gantt chart's rows: each port that carries a message, in a stable order."""
        return sorted(set(self.graph().devices or []), key=_port_order)

    @property
    def time(self) -> float:
        """The simulated makespan (equal to :func:`predicted_time`)."""
        return max((r.end for r in self.schedule()), default=0.0)

    def times_by_devices(self, up_to: int = 16) -> dict[str, list[tuple[int, float]]]:
        """Each way's closed-form time for 2..up_to devices (the explorer's curves)."""
        return {kind: [(n, predicted_time(kind, n, self.size, self.alpha, self.beta))
                       for n in range(2, up_to + 1)] for kind in KINDS}

    def best(self) -> str:
        """The fastest way at these settings."""
        return min(KINDS, key=lambda k: predicted_time(k, self.n, self.size, self.alpha,
                                                       self.beta))

    def summary(self) -> str:
        latency = self.alpha / (self.alpha + self.beta * self.size / max(1, self.n))
        regime = "latency-bound" if latency > 0.5 else "bandwidth-bound"
        return (f"{self.kind} all-reduce of {self.size:.4g} bytes over {self.n} devices "
                f"(alpha {self.alpha:.3g} s, beta {self.beta:.3g} s/byte): "
                f"{self.time:.4g} s = {FORMULAS[self.kind]}; "
                f"{bytes_per_device(self.kind, self.n, self.size):.4g} bytes per device; "
                f"{regime}; fastest here: {self.best()}")


# --- the three task graphs: (names, deps, bytes, ports) ------------------------------------
def _server(n: int, size: float) -> tuple[list[str], list[list[int]], list[float], list[str]]:
    names = [f"push {i}>S" for i in range(n)] + [f"pull S>{i}" for i in range(n)]
    # a pull waits for every push: the server sums them all first
    deps: list[list[int]] = [[] for _ in range(n)] + [list(range(n)) for _ in range(n)]
    return names, deps, [size] * (2 * n), ["server in"] * n + ["server out"] * n


def _ring(n: int, size: float) -> tuple[list[str], list[list[int]], list[float], list[str]]:
    names, deps, ports = [], [], []
    for step in range(2 * (n - 1)):
        phase = "rs" if step < n - 1 else "ag"  # reduce-scatter, then all-gather
        for i in range(n):
            names.append(f"{phase} {i}>{(i + 1) % n}")
            ports.append(f"dev{i} out")
            # what device i sends now is what it received at the last step (from i - 1)
            deps.append([] if step == 0 else [(step - 1) * n + (i - 1) % n])
    return names, deps, [size / n] * len(names), ports


def _tree(n: int, size: float) -> tuple[list[str], list[list[int]], list[float], list[str]]:
    names: list[str] = []
    deps: list[list[int]] = []
    ports: list[str] = []
    into: dict[int, list[int]] = {i: [] for i in range(n)}  # tasks delivering to a device
    for r in range(_rounds(n)):  # reduce: i sends its partial sum to i - 2**r
        for i in range(2 ** r, n, 2 ** (r + 1)):
            names.append(f"reduce {i}>{i - 2 ** r}")
            ports.append(f"dev{i - 2 ** r} in")  # a partner may get several: one at a time
            deps.append(list(into[i]))
            into[i - 2 ** r].append(len(names) - 1)
    got = {0: list(into[0])}  # the root has the sum once every reduce into it is done
    for r in reversed(range(_rounds(n))):  # broadcast: i sends the sum to i + 2**r
        for i in range(0, n, 2 ** (r + 1)):
            if i + 2 ** r < n:
                names.append(f"bcast {i}>{i + 2 ** r}")
                ports.append(f"dev{i} out")
                deps.append(list(got[i]))
                got[i + 2 ** r] = [len(names) - 1]
    return names, deps, [size] * len(names), ports


def _rounds(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


def _port_order(port: str) -> tuple[int, str]:
    head = port.split()[0]
    return (int(head[3:]) if head.startswith("dev") else -1, port)


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"all-reduce kind {kind!r}: choose one of {KINDS}")
    return kind


def _check(n: int, size: float, alpha: float, beta: float) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ValueError(f"an all-reduce needs n >= 2 devices (a whole number), got {n!r}")
    if size < 0 or alpha < 0 or beta < 0:
        raise ValueError(f"size, alpha and beta must be >= 0, got {size}, {alpha}, {beta}")
