"""The queue stepper's model: a StepEngine's queue, its state and the four actions on it.

What this module teaches
------------------------
Every NDArray operation is *pushed* to the engine and returns at once; a
:class:`~hybridlab.engine.StepEngine` holds the pushed tasks until asked to run one.
:class:`QueueModel` reads that queue -- each task's state, what it reads and writes, the
per-array queue of pending readers and writers that MXNet's engine keeps, the bytes a
pending task pins -- and acts on it with the engine's own calls: **step** is
``StepEngine.step()``, **sync** on an array is ``wait_to_read()`` (exactly the tasks that
array needs, and no more), **wait all** is ``nd.waitall()``. The drawing and the widget
are :mod:`hybridlab.viz.stepper`.

Invariants
----------
* The engine's ``push`` hook only records (a counter); nothing is computed per push.
* Task numbers are counted from the first task the model saw (``#0``, ``#1``, ...), and
  the text never holds addresses or times, so nbval can compare it.
* Large queues are shown through a window: the ready tasks plus the most recent
  :data:`WINDOW` tasks, with a count of what is hidden.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

from hybridlab.engine import Callback, StepEngine, Task, Var
from hybridlab.errors import MXNetError

WINDOW = 100  # tasks drawn at most, besides the ready ones
PENDING = ("waiting", "ready", "running")


class QueueModel:
    """The state of a StepEngine's queue and the four actions on it.

    ``arrays`` gives the user's arrays by name (called when names are needed): an array's
    name labels its Var in drawings and in :meth:`sync_choices`, and its size counts in
    :meth:`pinned_bytes`. Arrays it does not know are named by their Var (``var12``).
    """

    def __init__(self, step_engine: StepEngine,
                 arrays: Callable[[], dict[str, Any]] | None = None) -> None:
        if not isinstance(step_engine, StepEngine):
            raise TypeError(f"the queue stepper needs a StepEngine, got "
                            f"{type(step_engine).__name__}; use queue_stepper() to install "
                            f"one, or engine.StepEngine()")
        self.engine = step_engine
        self.arrays = arrays or (lambda: {})
        self.first_seq = step_engine.tasks[0].seq if step_engine.tasks else None
        self.error: str | None = None  # what the last sync raised, as the user would see it
        self.pushed_since_draw = 0
        self._callback = Callback(push=self._on_push)
        step_engine.add_callback(self._callback)

    def _on_push(self, task: Task) -> None:  # the push hook: record, never draw
        if self.first_seq is None:
            self.first_seq = task.seq
        self.pushed_since_draw += 1

    def detach(self) -> None:
        """Stop listening to the engine (the model can still be read)."""
        if self._callback in self.engine._callbacks:
            self.engine.remove_callback(self._callback)

    # -- reading the state ------------------------------------------------------------
    @property
    def tasks(self) -> list[Task]:
        return list(self.engine.tasks)

    def number(self, task: Task) -> int:
        """The task's number counted from the first task the stepper saw."""
        return task.seq - (self.first_seq or 0)

    def var_names(self) -> dict[Var, str]:
        return {array._var: name for name, array in sorted(self.arrays().items())}

    def name_of(self, var_name: str, names: dict[str, str]) -> str:
        return names.get(var_name, var_name)

    def counts(self) -> dict[str, int]:
        tasks = self.tasks
        done = sum(t.state in ("done", "failed", "skipped") for t in tasks)
        return {"pushed": len(tasks), "done": done, "pending": len(tasks) - done,
                "ready": len(self.engine.ready)}

    def pinned_bytes(self) -> int:
        """Bytes of the existing arrays that pending tasks will read: they cannot be
        freed until those tasks run (a result takes no memory until its task runs)."""
        tasks = self.tasks
        pending_reads = {v for t in tasks if t.state in PENDING for v in t.reads}
        first_writer: dict[Var, Task] = {}
        for task in tasks:
            for var in task.writes:
                first_writer.setdefault(var, task)
        total = 0
        for array in self.arrays().values():
            var = array._var
            writer = first_writer.get(var)
            exists = writer is None or writer.state not in PENDING
            if var in pending_reads and exists:
                total += math.prod(array.shape) * array.dtype.itemsize
        return total

    def queues(self) -> dict[str, list[tuple[int, str, str]]]:
        """Each array's pending accesses in push order: (task number, "read"/"write",
        state) -- the per-variable queue of MXNet's engine."""
        names, result = {str(v): n for v, n in self.var_names().items()}, {}  # type: ignore[var-annotated]
        for task in self.tasks:
            if task.state not in PENDING:
                continue
            for var, role in [(v, "read") for v in task.reads if v not in task.writes] + \
                             [(v, "write") for v in task.writes]:
                label = names.get(str(var), str(var))
                result.setdefault(label, []).append((self.number(task), role, task.state))
        return result

    def sync_choices(self) -> list[str]:
        """Names of the user's arrays that a pending task writes (what a sync can run)."""
        pending_writes = {v for t in self.tasks if t.state in PENDING for v in t.writes}
        return [name for var, name in self.var_names().items() if var in pending_writes]

    def window(self) -> tuple[list[Task], int]:
        """The tasks to draw (ready ones + the most recent :data:`WINDOW`), and how many
        are hidden."""
        tasks = self.tasks
        if len(tasks) <= WINDOW:
            return tasks, 0
        shown = set(map(id, tasks[-WINDOW:])) | set(map(id, self.engine.ready))
        kept = [t for t in tasks if id(t) in shown]
        return kept, len(tasks) - len(kept)

    # -- the actions ------------------------------------------------------------------
    def step(self) -> Task | None:
        """Run one ready task (``StepEngine.step``); return it, or None if none is ready."""
        ready = list(self.engine.ready)
        self.error = None
        record = self.engine.step()
        if record is None:
            return None
        return next((t for t in ready if t.seq == record.seq), None)

    def sync(self, name: str) -> None:
        """``wait_to_read()`` on the user's array ``name``: run what it needs, no more."""
        arrays = self.arrays()
        if name not in arrays:
            raise KeyError(f"no array named {name!r}; choose one of {sorted(arrays)}")
        self._guarded(lambda: self.engine.wait_for_var(arrays[name]._var))

    def wait_all(self) -> None:
        """``nd.waitall()``: run everything."""
        self._guarded(self.engine.wait_all)

    def reset(self) -> None:
        """Forget finished tasks (``StepEngine.clear``)."""
        self.error = None
        self.engine.clear()

    def _guarded(self, wait: Callable[[], None]) -> None:
        self.error = None
        try:
            wait()
        except MXNetError as err:  # shown where the sync would raise it
            self.error = f"MXNetError: {err}"

    # -- describing it ----------------------------------------------------------------
    def label(self, task: Task) -> str:
        filename, line = task.origin
        where = f"line {line}" if line else "?"
        if filename and not filename.startswith(("/tmp/ipykernel", "<ipython")):
            where = f"{os.path.basename(filename)}:{line}"
        return f"#{self.number(task)} {task.name}\n{where}"

    def summary(self) -> str:
        """A stable text form: counters, tasks, per-array queues, the last error."""
        c, names = self.counts(), {str(v): n for v, n in self.var_names().items()}
        lines = [f"queue stepper: {c['pushed']} pushed, {c['done']} done, {c['pending']} "
                 f"pending ({c['ready']} ready); {self.pinned_bytes()} bytes pinned"]
        tasks, hidden = self.window()
        for task in tasks:
            reads = ",".join(names.get(str(v), str(v)) for v in task.reads) or "-"
            writes = ",".join(names.get(str(v), str(v)) for v in task.writes) or "-"
            deps = " ".join(f"#{d.seq - (self.first_seq or 0)}({d.kind})" for d in task.deps)
            lines.append(f"  #{self.number(task)} {task.name} {reads} -> {writes} "
                         f"{task.state}{' after ' + deps if deps else ''}")
        if hidden:
            lines.append(f"  ({hidden} older tasks hidden)")
        for label, queue in self.queues().items():
            lines.append(f"  queue {label}: " + ", ".join(f"#{n} {role}" for n, role, _ in queue))
        if self.error:
            lines.append(self.error.splitlines()[0])
        return "\n".join(lines)
