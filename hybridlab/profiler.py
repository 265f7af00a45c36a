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
"""

from __future__ import annotations

import json
from typing import Any

from hybridlab import engine

_config: dict[str, Any] = {"filename": "profile.json"}
_records: list[engine.TaskRecord] = []
_active: list[engine.Callback] = []  # the recording callback, while the profiler runs
_streams: dict[int, str] = {}  # worker -> the stream it worked for, when first recorded


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
        engine.unfollow(_active.pop())


def dumps(reset: bool = False) -> str:
    """The recorded ops as a Chrome Trace Event JSON string; ``reset`` forgets them."""
    records = list(_records)
    origin = min((r.start for r in records), default=0.0)
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
    if reset:
        _records.clear()
        _streams.clear()
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"})


def dump(finished: bool = True) -> None:
    """Write :func:`dumps` to the configured file (``finished=True`` also forgets them)."""
    from hybridlab.ndarray_io import atomic_write

    atomic_write(_config["filename"], dumps(reset=False))  # whole, or the old file
    if finished:  # forgotten only once they are safely written
        _records.clear()
        _streams.clear()
