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

Two layers, as every instrument of the course (ARCHITECTURE.md, "Instruments"):

* :class:`~hybridlab.lab.queue.QueueModel` -- plain Python: the state and the actions.
* :class:`QueueStepper` -- a thin ipywidgets view over a model, displayed through
  :class:`~hybridlab.viz.bundle.Instrument` (widget, PNG snapshot, text summary).

The drawing is refreshed once per notebook cell (IPython's ``post_run_cell``) or on a
click, never per push.
"""

from __future__ import annotations

import html
from typing import Any, Callable

from hybridlab import engine as _engine
from hybridlab.engine import DEP_KINDS, StepEngine
from hybridlab.lab.queue import QueueModel
from hybridlab.viz.bundle import ROW, Instrument, fitted_svg
from hybridlab.viz.palette import (
    BACKGROUND,
    ERROR_TEXT,
    INK,
    STATE_COLOURS,
    STATE_STYLES,
    TASK_STATES,
)

NO_CHOICE = "(nothing pending)"  # the Sync on menu when no pending task writes a named array
# A legend cell's outline, as the state's node outline (graphviz HTML cells know these).
_CELL = {"waiting": "dashed", "ready": "solid", "running": "solid", "done": "solid",
         "failed": "solid", "skipped": "dotted"}


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


def queue_dot(model: QueueModel) -> Any:
    """The queue as a graphviz Digraph (tasks by state, dependencies by array/kind)."""
    from hybridlab.viz.graph import graphviz_class

    names = {str(v): n for v, n in model.var_names().items()}
    dot = graphviz_class()("queue", graph_attr={"rankdir": "LR", "bgcolor": BACKGROUND,
                                                "fontsize": "10"},
                           node_attr={"shape": "box", "fontname": "Helvetica",
                                      "fontsize": "10"},
                           edge_attr={"fontname": "Helvetica", "fontsize": "9"})
    tasks, hidden = model.window()
    shown = {t.seq for t in tasks}
    for task in tasks:
        dot.node(f"t{task.seq}", model.label(task), style=STATE_STYLES[task.state],
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
        # never wider than the output (a flex item would otherwise take its drawing's width)
        self.drawing = widgets.HTML(layout={"max_width": "100%", "margin": "0"})
        self.queues = widgets.HTML()
        self.counter = widgets.HTML()
        self.message = widgets.HTML()
        self.buttons = {name: widgets.Button(description=name, layout={"width": "auto"})
                        for name in ("Step", "Sync on", "Wait all", "Reset")}
        self.choice = widgets.Dropdown(options=[NO_CHOICE], description="array",
                                       layout={"width": "16em"},
                                       style={"description_width": "auto"})
        self.hint = ""  # what the last click could not do, said under the drawing
        actions = {"Step": model.step, "Wait all": model.wait_all, "Reset": model.reset,
                   "Sync on": self._sync}
        for name, button in self.buttons.items():
            button.on_click(lambda _, act=actions[name]: self._act(act))
        controls = widgets.HBox([self.buttons["Step"], self.buttons["Sync on"], self.choice,
                                 self.buttons["Wait all"], self.buttons["Reset"]], layout=ROW)
        # the drawing and the per-array queues side by side, the queues below when the
        # output is too narrow for both (a laptop's window): never pushed off the edge
        beside = widgets.HBox([self.drawing, self.queues], layout=ROW)
        self.widget = widgets.VBox([controls, self.counter, beside, self.message])
        self.widget.add_class("hybridlab-queue-stepper")
        self._shell = _shell()
        if self._shell is not None:
            self._shell.events.register("post_run_cell", self._after_cell)
        self.refresh()

    def _act(self, action: Callable[[], Any]) -> None:
        self.hint = ""
        action()
        self.refresh()

    def _sync(self) -> None:
        """The Sync on button: ``wait_to_read()`` on the array chosen in the menu."""
        if self.choice.value not in self.model.sync_choices():
            self.hint = ("Sync on: no pending task writes a named array; push some work "
                         "(e.g. b = a * 2) and choose the array in the menu")
            return
        self.model.sync(self.choice.value)

    def before_display(self) -> None:
        self.refresh()  # a display records now: pushes or model calls since the last draw

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
            svg = queue_dot(model).pipe(format="svg", encoding="utf-8")
            self.drawing.value = fitted_svg(svg)  # the whole queue in view, 10-pt text
        except Exception as err:  # no dot program: the text still shows the state
            self.drawing.value = f"<pre>{html.escape(str(err))}</pre>"
        rows = "".join(
            f"<tr><td><b>{html.escape(name)}</b></td><td>"
            + " ".join(f"<span class='hybridlab-chip' style='background:{STATE_COLOURS[state]};"
                       f"color:{INK};padding:0 3px'>"
                       f"#{n} {role}</span>" for n, role, state in queue) + "</td></tr>"
            for name, queue in model.queues().items())
        self.queues.value = ("<div style='margin-left:1em'><b>per-array queues</b>"
                             f"<table>{rows or '<tr><td>(empty)</td></tr>'}</table></div>")
        choices, chosen = model.sync_choices(), self.choice.value
        self.choice.options = choices or [NO_CHOICE]  # a placeholder, never a blank menu
        self.choice.value = chosen if chosen in choices else (choices or [NO_CHOICE])[0]
        self.choice.disabled = not choices
        said = [f"<pre style='{ERROR_TEXT}'>{html.escape(model.error)}</pre>"] if model.error \
            else []
        said += [f"<i>{html.escape(self.hint)}</i>"] if self.hint else []
        self.message.value = "".join(said)

    def snapshot_png(self) -> bytes | None:
        try:
            return queue_dot(self.model).pipe(format="png")
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
