"""The queue stepper: the dependency engine's queue, drawn, and played one task at a time.

What this module teaches
------------------------
Every NDArray operation is *pushed* to the engine and returns at once; a
:class:`~hybridlab.engine.StepEngine` holds the pushed tasks until asked to run one. The
stepper draws that queue as a graph -- one node per task (its operator and the line of
your code that pushed it), one edge per dependency (the array, and whether it is a
read-after-write, write-after-read or write-after-write) -- coloured by task state, and
beside it each array's own queue of pending readers and writers, the per-variable queue
MXNet's engine keeps. Its buttons are the engine's own calls: **Step** is
``StepEngine.step()``, **Sync on** an array is ``wait_to_read()`` (it runs exactly the
tasks that array needs, and no more), **Wait all** is ``nd.waitall()``.

Two layers, as every instrument of the course (DESIGN.md section 5):

* :class:`QueueModel` -- plain Python: the state and the actions, tested by pytest.
* :class:`QueueStepper` -- a thin ipywidgets view over a model, displayed through
  :class:`~hybridlab.viz.bundle.Instrument` (widget, PNG snapshot, text summary).

Invariants
----------
* The engine's ``push`` hook only records; the drawing is refreshed once per notebook cell
  (IPython's ``post_run_cell``) or on a click, never per push.
* Task numbers are counted from the first task the stepper saw (``#0``, ``#1``, ...), and
  the text never holds addresses or times, so nbval can compare it.
* Large queues are drawn through a window: the ready tasks plus the most recent
  :data:`WINDOW` tasks, with a count of what is hidden.
"""

from __future__ import annotations

import html
import math
import os
from typing import Any, Callable

from hybridlab import engine as _engine
from hybridlab.engine import DEP_KINDS, Callback, StepEngine, Task, Var
from hybridlab.errors import MXNetError
from hybridlab.viz.bundle import Instrument
from hybridlab.viz.palette import BACKGROUND, STATE_COLOURS, STATE_STYLES, TASK_STATES

WINDOW = 100  # tasks drawn at most, besides the ready ones
# A legend cell's outline, as the state's node outline (graphviz HTML cells know these).
_CELL = {"waiting": "dashed", "ready": "solid", "running": "solid", "done": "solid",
         "failed": "solid", "skipped": "dotted"}
_PENDING = ("waiting", "ready", "running")


def user_arrays(namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    """The NDArrays of a namespace by name (default: the notebook's variables)."""
    from hybridlab.ndarray import NDArray

    if namespace is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return {}
        shell = get_ipython()
        namespace = shell.user_ns if shell is not None else {}
    return {name: value for name, value in namespace.items()
            if isinstance(value, NDArray) and not name.startswith("_")}


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
        pending_reads = {v for t in tasks if t.state in _PENDING for v in t.reads}
        first_writer: dict[Var, Task] = {}
        for task in tasks:
            for var in task.writes:
                first_writer.setdefault(var, task)
        total = 0
        for array in self.arrays().values():
            var = array._var
            writer = first_writer.get(var)
            exists = writer is None or writer.state not in _PENDING
            if var in pending_reads and exists:
                total += math.prod(array.shape) * array.dtype.itemsize
        return total

    def queues(self) -> dict[str, list[tuple[int, str, str]]]:
        """Each array's pending accesses in push order: (task number, "read"/"write",
        state) -- the per-variable queue of MXNet's engine."""
        names, result = {str(v): n for v, n in self.var_names().items()}, {}  # type: ignore[var-annotated]
        for task in self.tasks:
            if task.state not in _PENDING:
                continue
            for var, role in [(v, "read") for v in task.reads if v not in task.writes] + \
                             [(v, "write") for v in task.writes]:
                label = names.get(str(var), str(var))
                result.setdefault(label, []).append((self.number(task), role, task.state))
        return result

    def sync_choices(self) -> list[str]:
        """Names of the user's arrays that a pending task writes (what a sync can run)."""
        pending_writes = {v for t in self.tasks if t.state in _PENDING for v in t.writes}
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

    def to_dot(self) -> Any:
        """The queue as a graphviz Digraph (tasks by state, dependencies by array/kind)."""
        from hybridlab.viz.graph import graphviz_class

        names = {str(v): n for v, n in self.var_names().items()}
        dot = graphviz_class()("queue", graph_attr={"rankdir": "LR", "bgcolor": BACKGROUND,
                                                    "fontsize": "10"},
                               node_attr={"shape": "box", "fontname": "Helvetica",
                                          "fontsize": "10"},
                               edge_attr={"fontname": "Helvetica", "fontsize": "9"})
        tasks, hidden = self.window()
        shown = {t.seq for t in tasks}
        for task in tasks:
            dot.node(f"t{task.seq}", self.label(task), style=STATE_STYLES[task.state],
                     fillcolor=STATE_COLOURS[task.state])
            for dep in task.deps:
                if dep.seq in shown:
                    dot.edge(f"t{dep.seq}", f"t{task.seq}",
                             label=f"{names.get(dep.var, dep.var)} {dep.kind}",
                             tooltip=DEP_KINDS[dep.kind])
        cells = "".join(  # one compact node: a row of cells in the states' styles
            f'<td bgcolor="{STATE_COLOURS[state]}" border="1" style="{_CELL[state]}" '
            f'cellpadding="3">{state}</td>' for state in TASK_STATES)
        hidden_note = f'<td border="0"> ({hidden} older hidden)</td>' if hidden else ""
        dot.node("legend", f'<<table border="0" cellspacing="3"><tr><td border="0">task '
                           f"states:</td>{cells}{hidden_note}</tr></table>>",
                 shape="plaintext", fontsize="9")
        return dot


class QueueStepper(Instrument):
    """The widget: the queue drawing, per-array queues, buttons and counters."""

    def __init__(self, model: QueueModel, restore: Any = None) -> None:
        import ipywidgets as widgets

        self.model, self._restore, self._closed = model, restore, False
        self.drawing = widgets.HTML()
        self.queues = widgets.HTML()
        self.counter = widgets.HTML()
        self.message = widgets.HTML()
        self.buttons = {name: widgets.Button(description=name, layout={"width": "auto"})
                        for name in ("Step", "Sync on", "Wait all", "Reset")}
        self.choice = widgets.Dropdown(options=[], description="", layout={"width": "10em"})
        actions = {"Step": model.step, "Wait all": model.wait_all, "Reset": model.reset,
                   "Sync on": lambda: self.choice.value and model.sync(self.choice.value)}  # type: ignore[func-returns-value]
        for name, button in self.buttons.items():
            button.on_click(lambda _, act=actions[name]: self._act(act))
        controls = widgets.HBox([self.buttons["Step"], self.buttons["Sync on"], self.choice,
                                 self.buttons["Wait all"], self.buttons["Reset"]])
        self.widget = widgets.VBox([controls, self.counter, widgets.HBox([self.drawing,
                                                                          self.queues]),
                                    self.message])
        self.widget.add_class("hybridlab-queue-stepper")
        self._shell = _shell()
        if self._shell is not None:
            self._shell.events.register("post_run_cell", self._after_cell)
        self.refresh()

    def _act(self, action: Callable[[], Any]) -> None:
        action()
        self.refresh()

    def _after_cell(self, result: Any = None) -> None:
        if self.model.pushed_since_draw:
            self.refresh()

    def refresh(self) -> None:
        """Redraw from the engine's state (once per cell or click)."""
        model = self.model
        model.pushed_since_draw = 0
        c = model.counts()
        self.counter.value = (f"<b>{c['pushed']}</b> pushed · <b>{c['done']}</b> done · "
                              f"<b>{c['pending']}</b> pending ({c['ready']} ready) · "
                              f"<b>{model.pinned_bytes()}</b> bytes pinned by pending tasks")
        try:
            svg = model.to_dot().pipe(format="svg", encoding="utf-8")
            svg = svg[svg.index("<svg"):].replace("<svg", '<svg style="max-width:100%;'
                                                  'height:auto"', 1)
            self.drawing.value = f"<div style='max-width:720px;overflow-x:auto'>{svg}</div>"
        except Exception as err:  # no dot program: the text still shows the state
            self.drawing.value = f"<pre>{html.escape(str(err))}</pre>"
        rows = "".join(
            f"<tr><td><b>{html.escape(name)}</b></td><td>"
            + " ".join(f"<span style='background:{STATE_COLOURS[state]};padding:0 3px'>"
                       f"#{n} {role}</span>" for n, role, state in queue) + "</td></tr>"
            for name, queue in model.queues().items())
        self.queues.value = ("<div style='margin-left:1em'><b>per-array queues</b>"
                             f"<table>{rows or '<tr><td>(empty)</td></tr>'}</table></div>")
        choices = model.sync_choices()
        self.choice.options = choices
        self.message.value = (f"<pre style='color:#a33'>{html.escape(model.error)}</pre>"
                              if model.error else "")

    def summary(self) -> str:
        return self.model.summary()

    def snapshot_png(self) -> bytes | None:
        try:
            return self.model.to_dot().pipe(format="png")
        except Exception:  # no dot program: text and widget only
            return None

    def close(self) -> None:
        """Stop watching; give the previous engine back if the stepper installed one."""
        if self._closed:
            return
        self._closed = True
        if self._shell is not None:
            self._shell.events.unregister("post_run_cell", self._after_cell)
        self.model.detach()
        if self._restore is not None:
            _engine.set_engine(self._restore)

    def __enter__(self) -> QueueStepper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def queue_stepper(step_engine: StepEngine | None = None,
                  arrays: Callable[[], dict[str, Any]] | None = None) -> QueueStepper:
    """Show the queue of ``step_engine``; without one, install a new StepEngine as the
    current engine (``close()``, or leaving a ``with`` block, gives the previous one
    back). ``arrays`` names the arrays (default: the notebook's variables)."""
    restore = None
    if step_engine is None:
        step_engine, restore = StepEngine(), _engine.current()
        _engine.set_engine(step_engine)
    return QueueStepper(QueueModel(step_engine, arrays or user_arrays), restore)
