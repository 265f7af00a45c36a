"""MXNet's ``mx.profiler``: engine traces as Chrome Trace Event JSON.

What this module teaches
------------------------
A profiler needs no magic: the engine already calls a ``posttask`` hook after every op,
with a :class:`~hybridlab.engine.TaskRecord` (name, worker, start, end). Collect those
records between ``set_state('run')`` and ``set_state('stop')``, and write each one as a
*complete event* (``"ph": "X"``, start ``ts`` and duration ``dur`` in microseconds) on
the row of the worker that ran it (``tid``), named by its stream (``worker 2: cpu(1)
copy``: NOTE [A worker per device] in engine.py). Open the file in https://ui.perfetto.dev or
``chrome://tracing`` to see which ops ran in parallel. This module reads only records.

    mx.profiler.set_config(profile_all=True, filename="profile.json")
    mx.profiler.set_state("run")
    ...                       # the code to profile
    mx.nd.waitall()           # let pending ops finish, so they are recorded
    mx.profiler.set_state("stop")
    mx.profiler.dump()

The program may mark its own spans and values beside the engine's: a :class:`Task`,
:class:`Frame` or :class:`Event` is a span (``start()``/``stop()``) in a :class:`Domain`,
a :class:`Counter` a value over time, a :class:`Marker` an instant. ``pause()`` and
``resume()`` leave gaps; ``dumps(format='table'|'json')`` gives MXNet's aggregate
statistics (count, total, min, max, average per name) instead of the trace.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any, Iterator

from hybridlab import engine

_config: dict[str, Any] = {"filename": "profile.json"}
_records: list[engine.TaskRecord] = []
_active: list[engine.Callback] = []  # the recording callback, while the profiler runs
_streams: dict[int, str] = {}  # worker -> the stream it worked for, when first recorded
_marks: list[dict[str, Any]] = []  # the program's own spans, counters and instants
_paused: list[bool] = []  # [True] between pause() and resume()


def _keep(task: engine.Task) -> None:
    record = task.record
    if record is not None:  # (set for every task a posttask hook sees)
        _records.append(record)
        if record.worker not in _streams:
            names = getattr(engine.current(), "worker_names", {})
            _streams[record.worker] = names.get(record.worker, "")


def set_config(filename: str = "profile.json", **options: Any) -> None:
    """Set the output file. MXNet's other options (``profile_all``, ``profile_symbolic``,
    ``profile_imperative``, ``aggregate_stats``, ...) are accepted: every op is recorded."""
    _config.update(options, filename=filename)


def set_state(state: str = "stop") -> None:
    """``'run'`` starts recording every op the engines execute; ``'stop'`` stops.

    The recording callback follows the current engine (:func:`engine.follow`), so ops
    run after ``engine.set_engine(...)`` or inside ``engine_scope`` are recorded too.
    """
    if state not in ("run", "stop"):
        raise ValueError(f"profiler state must be 'run' or 'stop', got {state!r}")
    if state == "run" and not _active:
        _active.append(engine.Callback(posttask=_keep))
        engine.follow(_active[0])
    elif state == "stop" and _active:
        if not _paused:
            engine.unfollow(_active[0])
        _active.pop()
        _paused.clear()


def pause() -> None:
    """Stop recording for a while (the state stays ``'run'``): :func:`resume` goes on."""
    if _active and not _paused:
        engine.unfollow(_active[0])
        _paused.append(True)


def resume() -> None:
    """Record again after :func:`pause`."""
    if _active and _paused:
        engine.follow(_active[0])
        _paused.clear()


def _recording() -> bool:
    return bool(_active) and not _paused


def dumps(reset: bool = False, format: str = "", sort_by: str = "total",
          ascending: bool = False) -> str:
    """The recorded ops (and the program's marks) as a Chrome Trace Event JSON string;
    with ``format='table'`` or ``'json'``, MXNet's aggregate statistics of them instead
    (sorted by ``sort_by``: total, avg, min, max or count). ``reset`` forgets them."""
    if format:
        text = _aggregate(format, sort_by, ascending)
        if reset:
            _forget()
        return text
    records = list(_records)
    origin = min([r.start for r in records] + [m["ts"] for m in _marks], default=0.0)
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "hybridlab engine"}}]
    for worker in sorted({r.worker for r in records}):
        stream = _streams.get(worker, "")
        name = "caller" if worker < 0 else f"worker {worker}: {stream}" if stream else \
            f"worker {worker}"
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": worker,
                       "args": {"name": name}})
    for record in records:
        events.append({"name": record.name, "cat": "operator", "ph": "X", "pid": 0,
                       "tid": record.worker, "ts": (record.start - origin) * 1e6,
                       "dur": (record.end - record.start) * 1e6,
                       "args": {"reads": list(record.reads), "writes": list(record.writes)}})
    events += [{**mark, "ts": (mark["ts"] - origin) * 1e6} for mark in _marks]
    if reset:
        _forget()
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"})


def _forget() -> None:
    _records.clear()
    _streams.clear()
    _marks.clear()


_SORT_KEYS = {"total": "Total", "avg": "Avg", "min": "Min", "max": "Max", "count": "Count"}


def _aggregate(format: str, sort_by: str, ascending: bool) -> str:
    """Count, total, min, max and average time (ms) per name, by domain: the engine's
    operators under ``operator``, the program's spans under their domain's name."""
    if format not in ("table", "json") or sort_by not in _SORT_KEYS:
        raise ValueError(f"dumps: format must be 'table' or 'json' and sort_by one of "
                         f"{list(_SORT_KEYS)}, got format={format!r}, sort_by={sort_by!r}")
    spans: dict[str, dict[str, list[float]]] = {}
    for record in _records:
        domain = CUSTOM_DOMAIN if "::" in record.name else "operator"
        spans.setdefault(domain, {}).setdefault(record.name, []).append(
            (record.end - record.start) * 1e3)
    for mark in _marks:
        if mark["ph"] == "X":
            spans.setdefault(mark["cat"], {}).setdefault(mark["name"], []).append(
                mark["dur"] / 1e3)
    key = _SORT_KEYS[sort_by]
    table = {domain: dict(sorted(((name, _stats(times)) for name, times in found.items()),
                                 key=lambda item: item[1][key], reverse=not ascending))
             for domain, found in spans.items()}
    if format == "json":
        return json.dumps({"Time": table, "Memory": {}, "Unit": {"Time": "ms",
                                                                  "Memory": "kB"}})
    rows = [f"{'Name':<40}{'Count':>8}{'Total (ms)':>14}{'Min':>10}{'Max':>10}{'Avg':>10}"]
    for domain, found in table.items():
        rows.append(f"\n{domain}\n" + "=" * len(domain))
        rows += [f"{name:<40}{st['Count']:>8}{st['Total']:>14.4f}{st['Min']:>10.4f}"
                 f"{st['Max']:>10.4f}{st['Avg']:>10.4f}" for name, st in found.items()]
    return "\n".join(rows)


def _stats(times: list[float]) -> dict[str, float]:
    return {"Count": len(times), "Total": sum(times), "Min": min(times), "Max": max(times),
            "Avg": sum(times) / len(times)}


class Domain:
    """A name grouping the program's own spans, counters and markers."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name


class Task:
    """A span of the program's own work in ``domain``: ``start()`` ... ``stop()``."""

    def __init__(self, domain: Domain, name: str) -> None:
        self.domain, self.name, self._start = domain, name, None  # type: Domain, str, float | None

    def start(self) -> None:
        self._start = time.perf_counter()

    def stop(self) -> None:
        if self._start is not None and _recording():
            end = time.perf_counter()
            _marks.append({"name": self.name, "cat": str(self.domain), "ph": "X", "pid": 0,
                           "tid": -2, "ts": self._start, "dur": (end - self._start) * 1e6})
        self._start = None


class Frame(Task):
    """A span marking one frame (an iteration) of the program's work."""


class Event(Task):
    """A span of the program's work outside any domain."""

    def __init__(self, name: str) -> None:
        super().__init__(Domain("event"), name)


class Counter:
    """A value over time in ``domain``: ``set_value``, ``increment``, ``+=``, ``-=``."""

    def __init__(self, domain: Domain, name: str, value: int | None = None) -> None:
        self.domain, self.name, self.value = domain, name, 0
        if value is not None:
            self.set_value(value)

    def set_value(self, value: int) -> None:
        self.value = value
        if _recording():
            _marks.append({"name": self.name, "cat": str(self.domain), "ph": "C", "pid": 0,
                           "ts": time.perf_counter(), "args": {self.name: value}})

    def increment(self, delta: int = 1) -> None:
        self.set_value(self.value + delta)

    def decrement(self, delta: int = 1) -> None:
        self.set_value(self.value - delta)

    def __iadd__(self, delta: int) -> Counter:
        self.increment(delta)
        return self

    def __isub__(self, delta: int) -> Counter:
        self.decrement(delta)
        return self


class Marker:
    """An instant in ``domain``: ``mark(scope)`` with scope ``'process'``, ``'thread'``,
    ``'global'`` (Chrome's ``p``, ``t``, ``g``)."""

    def __init__(self, domain: Domain, name: str) -> None:
        self.domain, self.name = domain, name

    def mark(self, scope: str = "process") -> None:
        if scope not in ("process", "thread", "global"):
            raise ValueError(f"Marker.mark: scope must be 'process', 'thread' or 'global', "
                             f"got {scope!r}")
        if _recording():
            _marks.append({"name": self.name, "cat": str(self.domain), "ph": "i", "pid": 0,
                           "tid": -2, "ts": time.perf_counter(), "s": scope[0]})


CUSTOM_DOMAIN = "Custom Operator"  # MXNet's domain of Python operators (mx.operator)


@contextlib.contextmanager
def custom_operator(name: str) -> Iterator[None]:
    """The Python code of an operator written with ``mx.operator`` runs inside: a span
    ``name::pure_python`` in the ``Custom Operator`` domain, and the ops it pushes are
    named ``name::op`` (``MySigmoid::_zeros``) and counted in that domain too."""
    task = Task(Domain(CUSTOM_DOMAIN), f"{name}::pure_python")
    task.start()
    try:
        with engine.name_scope(name):
            yield
    finally:
        task.stop()


def dump(finished: bool = True) -> None:
    """Write :func:`dumps` to the configured file (``finished=True`` also forgets them)."""
    from hybridlab.ndarray_io import atomic_write

    atomic_write(_config["filename"], dumps(reset=False))  # whole, or the old file
    if finished:  # forgotten only once they are safely written
        _forget()
