"""The dependency engine: MXNet's engine in miniature.

What this module teaches
------------------------
``c = a + b`` in hybridlab does not compute anything on the spot: it *pushes* an
operation to the engine together with the variables it reads (``a``, ``b``) and writes
(``c``), and returns at once. The engine runs the operation as soon as the order of the
program allows it, possibly on another thread and in parallel with unrelated work. The
values are only needed at a *sync point* (``asnumpy()``, ``wait_to_read()``,
``nd.waitall()``), which waits for the operations that produce them.

Every array buffer is backed by one :class:`Var`. Ordering is tracked per variable,
exactly as MXNet's ``PushAsync(fn, const_vars, mutable_vars)`` does:

* read-after-write:  an op reading ``v`` waits for the last op that wrote ``v``;
* write-after-read:  an op writing ``v`` waits for every op reading ``v`` since then;
* write-after-write: an op writing ``v`` waits for the last op that wrote ``v``.

Reads overlap with each other; writes wait. A Var may be both read and written
(an in-place update). For example::

    push                  reads  writes  waits for
    #0  a = nd.ones(3)    -      a       -
    #1  b = a * 2         a      b       #0 (read-after-write)
    #2  c = a + 1         a      c       #0            (#1 and #2 may run together)
    #3  a += 1            a      a       #0 (write-after-write), #1 #2 (write-after-read)
    #4  d = b + c         b c    d       #1 #2

Because these three rules order every pair of ops touching one buffer with at least
one write, the results are the same, bit for bit, whatever engine runs the program and
however many workers it has: there are no data races.

The task states (each pushed op is a :class:`Task` in exactly one of them)
---------------------------------------------------------------------------
``waiting``   pushed, some op it depends on has not finished (``task.blockers > 0``)
``ready``     every dependency finished; handed to the executor (queue / step list)
``running``   its function is executing on a worker
``done``      finished normally                      \\
``failed``    its function raised; the error is kept  } the *finished* states
``skipped``   not run: an op it depends on failed    /

One scheduling algorithm, three executors (dask's ``get_async(submit, ...)`` idea):
:meth:`Engine.push` links the task to its dependencies and, when it is ready, calls
``_submit``; completing a finished task (``_complete``) makes its dependents ready.
Only ``_submit`` differs: :class:`ThreadedEngine` puts the task on a queue that a pool of
worker threads drains; :class:`StepEngine` keeps it in a visible ``ready`` list until
you call :meth:`StepEngine.step`; :class:`NaiveEngine` runs it at once, in the caller's
thread. As nothing can ever be waiting on a NaiveEngine, it skips the bookkeeping and
just calls the function when no callback is listening: the oracle of the tests.

Errors (the rule)
-----------------
An exception raised by an op is stored on the task, and the Vars it writes carry the
failure. An op that reads or overwrites a Var carrying a failure is *skipped*, and the
Vars it writes carry the same failure (so it spreads transitively; an op that only had
to wait for a failed *reader* is not affected). The failure is raised once, as
:class:`~hybridlab.errors.MXNetError` chained to the original exception, at the first
sync point that depends on it (``wait_for_var`` on a poisoned Var) or at ``wait_all``,
which raises the earliest failure not yet reported and reports the others with it (its
message names them): as MXNet's ``waitall``, a second ``wait_all`` is quiet. Once
reported, the failure is forgotten: ops pushed *after* the report treat the Var as
healthy again (its buffer keeps whatever it held, as in MXNet). Deciding by push order
keeps this deterministic. A buffer that no op ever filled has nothing to read, though:
an op reading it fails when it runs, naming the failed op (the front end's NOTE [Unfilled
inputs]; ARCHITECTURE.md, "The engine after a failure"), until an op overwrites it.
NaiveEngine raises at the push itself. Op functions must not push or wait themselves.

Traces: every executed op can be recorded as a :class:`TaskRecord` by callbacks
(:class:`Callback`, dask's ``start/pretask/posttask/finish`` hooks). Tracing is off by
default to keep pushes cheap; ``set_tracing(True)`` records into ``engine.trace``
(a bounded deque), and the profiler adds its own callback.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import sys
import threading
import traceback
from dataclasses import dataclass
from queue import SimpleQueue
from time import perf_counter
from typing import (
    Any,
    Callable,
    ContextManager,
    Iterable,
    Iterator,
    Literal,
    NamedTuple,
    Sequence,
    TypeVar,
    overload,
)

from hybridlab import config
from hybridlab.errors import MXNetError, UnknownEngineError
from hybridlab.userline import user_frame

_FINISHED = frozenset(("done", "failed", "skipped"))
_NEVER = sys.maxsize  # reported_at of a failure nobody has reported yet
_task_numbers = itertools.count()  # push order, shared by all engines (next() is atomic)
_var_numbers = itertools.count()


class Var:
    """The engine's handle on one array buffer; it holds no data, only ordering state."""

    __slots__ = ("uid", "name", "_writer", "_readers", "_read_seqs")

    def __init__(self, name: str = "") -> None:  # one per array: keep it cheap
        self.uid = next(_var_numbers)
        self.name = name
        self._writer: Task | None = None  # the last op pushed that writes this Var
        self._readers: collections.deque[Task] | None = None  # unfinished readers since then
        # seq of every op that read it since the last write, finished or not: kept only
        # while the engine is observed (NOTE [Observed engines])
        self._read_seqs: list[int] | None = None

    def __str__(self) -> str:
        return self.name or f"var{self.uid}"

    def __repr__(self) -> str:
        return f"Var({str(self)!r})"


# The three orderings of the module docstring, by their short names.
DEP_KINDS = {"RAW": "read-after-write", "WAR": "write-after-read", "WAW": "write-after-write"}


class Dep(NamedTuple):
    """One dependency of a task: it waits for op ``seq`` because of Var ``var``
    (``str(var)``), in the way ``kind`` says (a key of :data:`DEP_KINDS`)."""

    seq: int
    var: str
    kind: str


@dataclass(frozen=True)
class TaskRecord:
    """One executed op: what ran, on which worker, when (``perf_counter`` seconds), and
    its place in the program: ``seq`` (push order) and ``deps`` (the :class:`Dep` s it
    had), so a recorded trace can be turned back into its dependency graph."""

    name: str
    worker: int
    start: float
    end: float
    reads: tuple[str, ...]  # Var names
    writes: tuple[str, ...]
    seq: int = -1  # -1: not from an engine (a simulated schedule)
    deps: tuple[Dep, ...] = ()


class _NameScope(threading.local):
    prefix = ""
    engine: Engine | None = None  # this thread's own engine (NOTE [Custom op names])


# NOTE [Custom op names]: the ops a Python operator's code pushes (mx.operator.CustomOp)
# are named ``<its op_type>::<op>`` (``MySigmoid::_zeros``), as MXNet's profiler shows them.
# Run as a graph node's kernel, that code is inside an engine task: the ops it pushes go
# to an engine of that thread's own (:func:`own_engine`), which runs them at once, since
# the task's worker cannot wait for ops queued behind itself
_SCOPE = _NameScope()


@contextlib.contextmanager
def name_scope(prefix: str) -> Iterator[None]:
    """Ops this thread pushes inside are named ``prefix::name`` (NOTE [Custom op names])."""
    outer, _SCOPE.prefix = _SCOPE.prefix, prefix
    try:
        yield
    finally:
        _SCOPE.prefix = outer


class Task:
    """One pushed op and its scheduling state (see the module docstring)."""

    __slots__ = ("seq", "name", "fn", "reads", "writes", "origin", "device", "copy", "state",
                 "deps", "dependents", "blockers", "sources", "failure", "error",
                 "reported_at", "record", "event")

    def __init__(self, fn: Callable[[], None], name: str, reads: tuple[Var, ...],
                 writes: tuple[Var, ...], origin: tuple[str, int], device: Any = None,
                 copy: bool = False) -> None:
        self.seq = next(_task_numbers)
        if _SCOPE.prefix:  # pushed by a Python operator's code: NOTE [Custom op names]
            name = f"{_SCOPE.prefix}::{name}"
        self.fn: Callable[[], None] | None = fn  # None once finished
        self.name, self.reads, self.writes, self.origin = name, reads, writes, origin
        self.device, self.copy = device, copy  # its stream: NOTE [A worker per device]
        self.state = "waiting"
        self.deps: tuple[Dep, ...] = ()  # every op it depends on (NOTE [Observed engines])
        self.dependents: list[Task] | tuple[()] | None = ()  # ops waiting on it (None: finished)
        self.blockers = 0  # how many of its dependencies have not finished
        self.sources: list[Task] | tuple[()] = ()  # ops whose results it reads or overwrites
        self.failure: Task | None = None  # the failed op it carries (itself if it raised)
        self.error: BaseException | None = None
        self.reported_at = _NEVER  # for a failed op: push number when it was raised
        self.record: TaskRecord | None = None
        self.event: threading.Event | None = None  # made only when someone waits

    def __repr__(self) -> str:
        return f"<Task #{self.seq} {self.name} {self.state} deps={list(self.deps)}>"


@dataclass
class Callback:
    """Hooks called by an engine: ``start(engine)`` when added, ``push(task)`` when an op
    is pushed (its ``deps`` and ``state`` are set), ``pretask(task, worker)`` before an op
    runs, ``posttask(task)`` after (``task.record`` is set), ``fail(task)`` when an op
    raised (``task.error``), ``skip(task)`` when an op is not run because something it
    reads failed, ``clear(engine)`` when the engine forgets finished tasks or its trace,
    and ``finish(engine)`` when removed. ``with Callback(posttask=...):`` adds it to the
    current engine. Hooks may be called from worker threads; they must not push or wait.
    """

    start: Callable[[Engine], None] | None = None
    pretask: Callable[[Task, int], None] | None = None
    posttask: Callable[[Task], None] | None = None
    finish: Callable[[Engine], None] | None = None
    push: Callable[[Task], None] | None = None
    fail: Callable[[Task], None] | None = None
    skip: Callable[[Task], None] | None = None
    clear: Callable[[Engine], None] | None = None

    def __enter__(self) -> Callback:
        current().add_callback(self)
        return self

    def __exit__(self, *exc: object) -> None:
        current().remove_callback(self)


def _user_line() -> tuple[str, int]:
    """(filename, line) of the innermost caller in user code (:mod:`hybridlab.userline`)."""
    frame = user_frame(2)
    return (frame.f_code.co_filename, frame.f_lineno) if frame else ("<unknown>", 0)


def _detached(exc: BaseException) -> BaseException:
    """``exc`` without its live traceback: the frames of a failed kernel hold its inputs
    (arrays of any size) for as long as the error is kept -- until someone waits for the
    op, which may be never. The traceback is kept as text instead, as a note that shows
    when the error is raised at the sync point."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    exc.__traceback__ = None
    for linked in (exc.__cause__, exc.__context__):  # their frames hold the same arrays
        if linked is not None:
            linked.__traceback__ = None
    note = ("the operator's traceback (kept as text, so a failure that nobody waits for "
            "holds no arrays):\n" + text.rstrip())
    if hasattr(exc, "add_note"):  # Python 3.11+
        exc.add_note(note)
    else:  # Python 3.10: kept where 3.11 would keep it, shown by no traceback printer
        setattr(exc, "__notes__", [*getattr(exc, "__notes__", []), note])  # noqa: B010
    return exc


def _op_error(failed: Task, waited: Task, also: Sequence[Task] = ()) -> MXNetError:
    filename, line = failed.origin
    message = (f"operator '{failed.name}' failed with {type(failed.error).__name__}: "
               f"{failed.error}\n  pushed at {filename}:{line}")
    if waited is not failed:
        message += (f"\n  '{waited.name}', which you waited for, was skipped because it "
                    "depends on that result")
    for other in also:
        where = ":".join(map(str, other.origin))
        message += (f"\n  also failed (reported here too): '{other.name}' with "
                    f"{type(other.error).__name__}: {other.error} (pushed at {where})")
    return MXNetError(message + "\n  The engine keeps working; fix the op and run it again.")


class _EngineLock:
    """The engine's lock, which also completes finished tasks for threads that did not wait.

    NOTE [finishing without waiting]: a worker that has run an op must update the shared
    bookkeeping (states, dependents, counts) under the engine lock. If it *waited* for the
    lock while the pushing thread held it, the two threads would keep handing the GIL to
    each other: the holder cannot release the lock without the GIL, the waiter cannot
    continue without both (a lock convoy, several thread switches per op). So a worker
    only *tries* the lock (``finish``): it leaves its task in ``finished``, and whoever
    holds the lock completes the tasks there before releasing it -- and looks once more
    after releasing, because a task left just before the release would else be stranded.
    Callers (push, waits) simply wait for the lock: ``with engine._lock:``.
    """

    def __init__(self, complete: Callable[[Task], None]) -> None:
        self._lock = threading.Lock()
        self._complete = complete  # called with the lock held, once per finished task
        self.finished: collections.deque[Task] = collections.deque()

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._release()

    def finish(self, task: Task) -> None:
        """Complete ``task`` now if the lock is free, else leave it to the lock's holder."""
        self.finished.append(task)  # deque.append is atomic: no lock needed
        if self._lock.acquire(blocking=False):
            self._release()

    def _release(self) -> None:
        while True:
            try:
                while self.finished:
                    self._complete(self.finished.popleft())
            finally:
                self._lock.release()
            if not self.finished or not self._lock.acquire(blocking=False):
                return  # nothing left, or its holder will complete it


class Engine:
    """The scheduling algorithm; subclasses supply ``_submit`` (the executor)."""

    _keep_history = False  # keep reads/writes of finished tasks (StepEngine draws them)
    synchronous = False  # ops run later, on workers or at step(): NOTE [Run now]

    def __init__(self) -> None:
        self._lock = _EngineLock(self._complete)  # guards the scheduling state
        self._idle: threading.Event | None = None  # made only when someone waits for idle
        self._pending = 0  # pushed, not finished
        self._failures: list[Task] = []  # failed ops not yet reported by wait_all
        self._callbacks: list[Callback] = []
        self._pretask: tuple[Callable[..., None], ...] = ()
        self._posttask: tuple[Callable[..., None], ...] = ()
        # push / fail / skip / clear hooks, by event
        self._hooks: dict[str, tuple[Callable[..., None], ...]] = {}
        self._observed = self._keep_history  # see NOTE [Observed engines]
        # the first hook that raised, not yet reported
        self._hook_error: tuple[Any, ...] | None = None
        self._hook_errors = 0  # how many hook calls raised since the last report
        self.trace: collections.deque[TaskRecord] = collections.deque(maxlen=100_000)
        self._recorder = Callback(posttask=self._keep_record)

    def push(self, fn: Callable[[], None], reads: Iterable[Var], writes: Iterable[Var],
             name: str = "op", device: Any = None, copy: bool = False) -> Task | None:
        """Schedule ``fn()``, which reads ``reads`` and writes ``writes``; return at once.

        ``device`` (any hashable; the front end passes a Context, None: the default
        device) and ``copy`` (a copy *into* that device) choose the stream that runs it on
        a ThreadedEngine (NOTE [A worker per device]); they never change the order.

        ``reads`` and ``writes`` may be any iterables of Vars, read once, here (the
        NaiveEngine reads them only when a callback listens: NOTE [Lazy reads and writes]
        in graph/cached_op.py). Returns the :class:`Task` (its ``state`` and ``deps``
        show what it waits for).
        """
        task = Task(fn, name, tuple(reads), tuple(writes), _user_line(), device, copy)
        with self._lock:
            self._pending += 1
            if self._observed:  # nobody watching: nothing more (NOTE [Observed engines])
                task.deps = self._dependencies(task)  # before _link moves each Var's writer
                self._register(task)
            self._link(task)
            if task.blockers == 0:
                task.state = "ready"
                self._submit(task)
        if self._hooks:
            self._call_hooks("push", task)
        return task

    def _register(self, task: Task) -> None:  # called with the lock held, when observed
        """A hook for executors that list their tasks (StepEngine, always observed)."""

    @staticmethod
    def _dependencies(task: Task) -> tuple[Dep, ...]:
        """Every op ``task`` depends on, finished or not, with the Var and the kind.

        NOTE [Observed engines]: the scheduler itself only needs the *unfinished* ops a
        task waits for (``_link``), and forgets finished readers at once: a parameter read
        by every call would otherwise keep a list of every call. An observer (a
        StepEngine, a callback, tracing) wants the program's whole dependency graph, so
        while one is attached the engine also keeps, per Var, the seq of every read since
        its last write -- small ints, not tasks, so nothing finished is kept alive. With
        nobody observing, pushes pay nothing for it and ``task.deps`` stays empty.
        """
        deps: list[Dep] = []
        writes = task.writes
        for var in task.reads:
            if var not in writes:  # an in-place update is a write (write-after-write)
                if var._writer is not None:
                    deps.append(Dep(var._writer.seq, str(var), "RAW"))
                if var._read_seqs is None:
                    var._read_seqs = []
                var._read_seqs.append(task.seq)
        for var in writes:
            if var._writer is not None:
                deps.append(Dep(var._writer.seq, str(var), "WAW"))
            deps.extend(Dep(seq, str(var), "WAR") for seq in var._read_seqs or ())
            var._read_seqs = None
        return tuple(deps)

    def _link(self, task: Task) -> None:
        """Apply the RAW / WAR / WAW rules: find the ops ``task`` must wait for."""
        sources: list[Task] = []  # the last writers of what it reads or overwrites
        readers: list[Task] = []  # earlier readers of what it overwrites
        writes = task.writes
        for var in task.reads:
            if var not in writes:  # an in-place var is handled as a write below
                writer = var._writer
                # a writer that finished without failing can neither block nor poison
                # ``task``: leave it out (a parameter read by every call has one)
                if writer is not None and (writer.dependents is not None
                                           or writer.failure is not None):
                    sources.append(writer)
                var_readers = var._readers
                if var_readers is None:
                    var_readers = var._readers = collections.deque()
                while var_readers and var_readers[0].dependents is None:
                    var_readers.popleft()  # forget finished readers
                var_readers.append(task)
        for var in writes:
            if var._writer is not None:
                sources.append(var._writer)
            if var._readers:
                readers.extend(var._readers)
            var._writer, var._readers = task, None
        blockers = 0
        for other in sources + readers:
            dependents = other.dependents
            if dependents is None or other is task:
                continue  # finished (nothing to wait for), or itself
            if dependents:
                if dependents[-1] is task:  # counted already: ``task`` was appended last
                    continue  # (an O(1) test: a write after many reads stays linear)
                dependents.append(task)  # (non-empty: a list)
            else:  # the first dependent: most ops never get one, so no list until then
                other.dependents = [task]
            blockers += 1
        task.blockers = blockers
        if sources:  # duplicates and ``task`` itself are harmless in _inherit_failure
            task.sources = sources

    @staticmethod
    def _inherit_failure(task: Task) -> None:
        """Skip ``task`` if a value it reads or overwrites came from a failed op.

        A failure reported before ``task`` was pushed no longer counts (see the rule).
        Readers it merely waited for (write-after-read) cannot poison it.
        """
        for source in task.sources:
            failed = source.failure
            if failed is not None and task.seq < failed.reported_at:
                if task.failure is None or failed.seq < task.failure.seq:
                    task.failure = failed  # the earliest failure wins: deterministic
        task.sources = ()

    def _submit(self, task: Task) -> None:  # called with the lock held
        raise NotImplementedError

    def _run(self, task: Task, worker: int) -> None:
        """Run one ready task (unless it must be skipped), then finish it, whatever happens:
        an unfinished task would hang every later wait."""
        self._inherit_failure(task)  # every source has finished by now
        try:
            if task.failure is None:
                self._execute(task, worker)
            elif self._hooks:
                self._call_hooks("skip", task)
        finally:
            self._finish(task)

    def _execute(self, task: Task, worker: int) -> None:
        task.state = "running"
        for hook in self._pretask:
            self._call_hook("pretask", hook, task, worker)
        start = perf_counter()
        try:
            task.fn()  # type: ignore[misc]  # (None only once it has run)
        except Exception as exc:  # stored, raised later at a sync point
            task.error, task.failure = _detached(exc), task
        except BaseException as exc:  # Ctrl-C while this thread ran it: stop (once finished)
            task.error, task.failure, task.reported_at = exc, task, next(_task_numbers)
            raise
        if self._posttask or self._keep_history:
            names = (tuple(map(str, task.reads)), tuple(map(str, task.writes)))
            task.record = TaskRecord(task.name, worker, start, perf_counter(), *names,
                                     task.seq, task.deps)
        for hook in self._posttask:
            self._call_hook("posttask", hook, task)
        if task.error is not None and self._hooks:
            self._call_hooks("fail", task)

    def _call_hook(self, kind: str, hook: Callable[..., None], task: Task, *args: Any) -> None:
        """Call a callback's hook; a hook that raises must not kill the worker thread.

        Its error is kept (the first one, and a count) and raised at the next sync point;
        the op itself is not affected.
        """
        try:
            hook(task, *args)
        except Exception as exc:
            with self._lock:
                if self._hook_error is None:
                    self._hook_error = (kind, hook, task.name, exc)
                self._hook_errors += 1

    def _call_hooks(self, event: str, task: Task) -> None:
        for hook in self._hooks.get(event, ()):
            self._call_hook(event, hook, task)

    def _raise_hook_error(self) -> None:
        with self._lock:
            if self._hook_error is None:
                return
            (kind, hook, op_name, exc), more = self._hook_error, self._hook_errors - 1
            self._hook_error, self._hook_errors = None, 0
        code = getattr(hook, "__code__", None)
        where = f" ({code.co_filename}:{code.co_firstlineno})" if code else ""
        raise MXNetError(
            f"the {kind} hook {getattr(hook, '__qualname__', hook)!s}{where} of an engine "
            f"Callback raised {type(exc).__name__}: {exc} (operator '{op_name}'"
            f"{f', and {more} more hook error(s)' if more else ''}); the operators ran "
            f"normally. Fix the hook, or remove its Callback with engine.remove_callback(...)."
        ) from exc

    def _finish(self, task: Task) -> None:
        self._lock.finish(task)  # see NOTE [finishing without waiting]

    def _complete(self, task: Task) -> None:
        """Mark a finished task done and make its dependents ready (lock held)."""
        task.state = ("failed" if task.error is not None
                      else "skipped" if task.failure is not None else "done")
        if task.error is not None:
            self._failures.append(task)
        dependents, task.dependents, task.fn = task.dependents or (), None, None
        if not self._keep_history:
            task.reads = task.writes = ()  # don't keep the program's history alive
        for dependent in dependents:
            dependent.blockers -= 1
            if dependent.blockers == 0:
                dependent.state = "ready"
                self._submit(dependent)
        if task.event is not None:
            task.event.set()
        self._pending -= 1
        if self._pending == 0 and self._idle is not None:
            self._idle.set()
            self._idle = None

    def _wait_task(self, task: Task) -> None:
        if task.dependents is None:  # finished (final: no lock needed to see it)
            return
        with self._lock:
            if task.dependents is None:
                return
            if task.event is None:
                task.event = threading.Event()
            event = task.event
        event.wait()

    def _wait_idle(self) -> None:
        while True:
            with self._lock:
                if self._pending == 0:
                    return
                if self._idle is None:
                    self._idle = threading.Event()
                idle = self._idle
            idle.wait()

    def wait_for_var(self, var: Var) -> None:
        """Block until every op writing ``var`` pushed so far has finished.

        Raises MXNetError (once) if one of them failed or was skipped because of a failure.
        """
        task = var._writer
        if task is not None:
            self._wait_task(task)
            if task.failure is not None:  # final now that it finished; usually no failure
                self._report(task)
        if self._hook_error is not None:
            self._raise_hook_error()

    def _keep_record(self, task: Task) -> None:
        if task.record is not None:  # (set for every task a posttask hook sees)
            self.trace.append(task.record)

    def _report(self, task: Task) -> None:
        """Raise the failure ``task`` carries, unless it was raised before."""
        with self._lock:
            failed = task.failure
            if failed is None:
                return
            report = failed.reported_at == _NEVER
            if report:
                failed.reported_at = next(_task_numbers)
        if report:
            raise _op_error(failed, task) from failed.error

    def wait_all(self) -> None:
        """Block until every pushed op has finished; raise the earliest unreported failure,
        the others reported with it (MXNet's ``waitall`` clears every failure it saw).

        (Errors of callback hooks come after the ops' failures; see :meth:`_call_hook`.)
        """
        self._wait_idle()
        with self._lock:
            unreported = sorted((t for t in self._failures if t.reported_at == _NEVER),
                                key=lambda t: t.seq)
            self._failures = []
            for failed in unreported:
                failed.reported_at = next(_task_numbers)
        if not unreported:
            return self._raise_hook_error()  # then a broken callback's error, if any
        raise _op_error(unreported[0], unreported[0], also=unreported[1:]) \
            from unreported[0].error

    def add_callback(self, callback: Callback) -> None:
        self._callbacks.append(callback)
        self._refresh_hooks()
        if callback.start:
            callback.start(self)

    def remove_callback(self, callback: Callback) -> None:
        self._callbacks.remove(callback)
        self._refresh_hooks()
        if callback.finish:
            callback.finish(self)

    def _refresh_hooks(self) -> None:  # new tuples: workers iterate the old ones safely
        self._pretask = tuple(c.pretask for c in self._callbacks if c.pretask)
        self._posttask = tuple(c.posttask for c in self._callbacks if c.posttask)
        hooks = {event: tuple(getattr(c, event) for c in self._callbacks if getattr(c, event))
                 for event in ("push", "fail", "skip", "clear")}
        self._hooks = {event: found for event, found in hooks.items() if found}
        self._observed = self._keep_history or bool(self._callbacks)

    def _cleared(self) -> None:
        """Tell the ``clear`` hooks that finished tasks or the trace were forgotten."""
        for hook in self._hooks.get("clear", ()):
            hook(self)

    def set_tracing(self, on: bool = True) -> None:
        """Record every executed op into ``self.trace`` (on) or stop recording (off)."""
        if on and self._recorder not in self._callbacks:
            self.add_callback(self._recorder)
        elif not on and self._recorder in self._callbacks:
            self.remove_callback(self._recorder)

    def clear_trace(self) -> None:
        self.trace.clear()
        self._cleared()

    def close(self) -> None:
        """Wait for pending ops and release resources; the engine may still be used."""
        self._wait_idle()

    # NOTE: [Run now] an op pushed to an engine with nothing pending and nobody watching
    # (no callback, no trace, not a StepEngine) has nothing to wait for and nothing to
    # record, so the caller may run it itself, at once, as the NaiveEngine runs every op:
    # no task, no queue, no thread switch. A front end that knows its op is short (a
    # compiled program measured to run in less than a thread switch costs) asks ``idle``
    # and runs it; if it raises, ``fail_now`` reports the error exactly as a pushed op's:
    # at once on the NaiveEngine, at the next sync point on the others.
    def idle(self) -> bool:
        """Nothing pending, nobody observing, no callback error to report (NOTE [Run now])."""
        return self._pending == 0 and not self._observed and self._hook_error is None

    def fail_now(self, error: Exception, reads: Iterable[Var], writes: Iterable[Var],
                 name: str = "op", device: Any = None) -> None:
        """An op run at once (NOTE [Run now]) raised ``error``: push an op that raises it,
        so its outputs fail as a pushed op's would."""
        def failed() -> None:
            raise error

        self.push(failed, reads, writes, name, device)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class NaiveEngine(Engine):
    """Runs each op at once in the caller's thread; an error raises at the push itself."""

    synchronous = True  # every op runs at its push (NOTE [Run now]: always, when idle)

    def push(self, fn: Callable[[], None], reads: Iterable[Var], writes: Iterable[Var],
             name: str = "op", device: Any = None, copy: bool = False) -> None:
        if self._pretask or self._posttask:  # callbacks want to see it: the full path
            task = super().push(fn, reads, writes, name, device, copy)  # linked (ready) ...
            assert task is not None  # (Engine.push returns the task it linked)
            self._run(task, 0)  # ... and run here, after push released the lock
        else:  # nothing can be waiting when every op runs at its push: just run it
            try:
                return fn()
            except Exception as exc:
                task = Task(fn, name, (), (), _user_line())
                task.error = _detached(exc)
        if task.error is not None:
            task.reported_at = next(_task_numbers)
            raise _op_error(task, task) from task.error
        if self._hook_error is not None:
            self._raise_hook_error()

    def _submit(self, task: Task) -> None:
        pass  # NaiveEngine.push runs the task itself, once the lock is released


class _BlasLimit:
    """One BLAS thread while any multi-worker engine is busy (NOTE [BLAS threads]).

    A count of the engines holding the limit, because several engines may be busy at
    once and BLAS has a single process-wide setting: the first ``hold`` saves the
    thread counts and sets 1, the last ``release`` restores them. threadpoolctl is
    imported on first use (it is slow to import and optional); without it, nothing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._libraries: list[Any] | None = None  # threadpoolctl controllers of the BLAS libs
        self._saved: list[int] = []

    def hold(self) -> None:
        with self._lock:
            self._holders += 1
            if self._holders == 1:
                self._saved = [lib.get_num_threads() for lib in self._blas_libraries()]
                for lib in self._blas_libraries():
                    lib.set_num_threads(1)

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0:
                for lib, threads in zip(self._blas_libraries(), self._saved):
                    lib.set_num_threads(threads)

    def _blas_libraries(self) -> list[Any]:
        if self._libraries is None:
            try:
                from threadpoolctl import ThreadpoolController
                found = ThreadpoolController().select(user_api="blas").lib_controllers
                self._libraries = list(found)
            except ImportError:
                self._libraries = []
        return self._libraries


_blas_limit = _BlasLimit()


class _NextSlot(threading.local):
    """One per thread: the ``next`` slot of NOTE [keep the next op] and the ``queue`` of
    the stream the thread works for. ``next`` is None (open) only while a worker runs an
    op; other threads see the class defaults and queue."""

    next: Task | None | bool = False
    queue: SimpleQueue[Any] | None = None


class ThreadedEngine(Engine):
    """Runs ready ops on worker threads: ``workers`` per device (default
    ``FLAGS['ENGINE_WORKERS']``) and one more per device for the copies into it.

    NOTE [A worker per device]: as MXNet's ``ThreadedEnginePerDevice``, every device has
    a stream of its own: a queue and ``workers`` threads that run the ops pushed with
    ``device=`` that device (the front end passes the device of an op's results), and a
    *copy stream* -- a queue and one thread -- for the ops pushed with ``copy=True``
    (``_copyto``: a copy into that device). So ``cpu(0)`` and ``cpu(1)`` compute side by
    side and a copy overlaps both. A stream starts at the first op pushed to it; ops that
    name no device share the ``None`` stream. Streams only decide *who* runs a ready op:
    when it is ready is the dependency rule's alone, so an op that reads on ``cpu(0)`` and
    writes on ``cpu(1)`` waits for the writers on both, whatever streams they ran on, and
    results never depend on the streams. ``worker_names`` names each worker thread by its
    number (the ``worker`` of a :class:`TaskRecord`; -1: a caller that ran an op while
    waiting, NOTE [help while waiting]), e.g. ``{0: 'cpu(0)', 1: 'cpu(1)', 2: 'cpu(1)
    copy'}``: ``gantt(records, rows=engine.worker_names)`` draws one row per stream.

    NOTE [BLAS threads]: numpy's BLAS would start its own threads inside every worker,
    so 2 workers x 2 BLAS threads would fight over 2 cores. So while an engine with more
    than one worker thread is *busy*, BLAS is limited to one thread (threadpoolctl, if
    installed). BLAS has one process-wide setting, so the limit is too: your own numpy
    code running at the same time is limited as well. It starts when a push finds the
    engine idle, and ends at the first sync point (``wait_for_var``, ``wait_all``, hence
    ``asnumpy()``, ``print``, ``nd.waitall()``) or ``close()`` that finds it idle again,
    so numpy timed after ``nd.waitall()`` gets all its BLAS threads back. The limit is
    switched only from the caller's thread, between its own numpy calls, never while
    the caller may be inside BLAS. The workers start at the first push, stop at close().

    Switching threads costs more than a small op, so three shortcuts save thread
    switches without changing the order: NOTE [keep the next op], NOTE [help while
    waiting] below, and NOTE [finishing without waiting] (``_EngineLock``).
    """

    def __init__(self, workers: int | None = None) -> None:
        super().__init__()
        self.workers = int(config.flag("ENGINE_WORKERS") if workers is None else workers)
        if not 1 <= self.workers <= config.MAX_WORKERS:
            source = "HYBRIDLAB_ENGINE_WORKERS" if workers is None else "workers"
            raise ValueError(f"ThreadedEngine needs 1..{config.MAX_WORKERS} workers, got "
                             f"{source}={self.workers}; use NaiveEngine to run every op in "
                             f"the caller's thread (more threads than cores only take turns)")
        # the streams' queues by device: compute, and copies into the device
        self._queues: tuple[dict[Any, SimpleQueue[Task | None]], ...] = ({}, {})
        self._last: tuple[Any, SimpleQueue[Task | None] | None] = (None, None)  # (device,
        # queue) of the last compute op submitted: most programs use one device
        self._threads: list[threading.Thread] = []
        self.worker_names: dict[int, str] = {-1: "caller"}
        self._limits_blas = False  # see NOTE [BLAS threads]
        self._unclaimed: dict[int, Task] = {}  # ready tasks nobody has started, by seq
        self._local = _NextSlot()  # per thread: see NOTE [keep the next op]

    def _submit(self, task: Task) -> None:  # the lock is held
        device, queue = self._last
        if task.copy or task.device is not device or queue is None:
            queue = self._queues[task.copy].get(task.device)
            if queue is None:
                queue = self._open(task)
            if not task.copy:
                self._last = (task.device, queue)
        self._unclaimed[task.seq] = task  # see _claim
        if not self._limits_blas and len(self._threads) > 1:  # was idle: now busy
            self._limits_blas = True
            _blas_limit.hold()
        local = self._local
        if local.next is None and local.queue is queue:  # NOTE [keep the next op]
            local.next = task
        else:
            queue.put(task)

    def _open(self, task: Task) -> SimpleQueue[Task | None]:
        """Start the stream ``task`` runs on (NOTE [A worker per device])."""
        queue: SimpleQueue[Task | None] = SimpleQueue()  # a fresh queue per stream and pool
        self._queues[task.copy][task.device] = queue
        device = "default" if task.device is None else str(task.device)
        count = 1 if task.copy else self.workers
        for index in range(count):
            worker = len(self.worker_names) - 1  # numbered across streams, from 0
            self.worker_names[worker] = (f"{device} copy" if task.copy else device
                                         if count == 1 else f"{device} #{index}")
            thread = threading.Thread(target=self._work, args=(worker, queue), daemon=True,
                                      name=f"hybridlab-worker-{worker}")
            thread.start()
            self._threads.append(thread)
        return queue

    def _work(self, worker: int, queue: SimpleQueue[Any]) -> None:
        # NOTE [keep the next op]: when an op finishes, the first dependent it makes ready
        # on this worker's own stream is kept in its ``next`` slot and run right after,
        # not queued: a chain of ops stays on one thread instead of waking another worker
        # for every link.
        self._local.queue = queue
        while (task := queue.get()) is not None:
            while task is not None:
                self._local.next = None  # the slot is open while this worker runs an op
                if self._claim(task):  # False if a waiting caller ran it already
                    self._run(task, worker)
                task = self._local.next

    def _claim(self, task: Task) -> bool:
        """True for exactly one thread: the one that will run ``task`` (a worker, or a caller
        waiting for it). ``dict.pop`` is atomic, so this needs no lock."""
        return self._unclaimed.pop(task.seq, None) is not None

    def _wait_task(self, task: Task) -> None:
        # NOTE [help while waiting]: if the op we wait for is ready but no worker has
        # taken it yet, run it in this thread (as worker -1) instead of waking a worker
        # and sleeping until it is done: two thread switches saved per sync point.
        if self._claim(task):
            self._run(task, -1)
        else:
            super()._wait_task(task)

    def close(self) -> None:
        self._wait_idle()
        with self._lock:
            threads, self._threads, queues = self._threads, [], self._queues
            self._queues, self._last = ({}, {}), (None, None)
            self.worker_names = {-1: "caller"}
        for by_device in queues:
            for queue in by_device.values():
                for _ in range(self.workers):  # a stop for each of its threads (copy: 1)
                    queue.put(None)
        for thread in threads:
            thread.join()
        self._release_blas_if_idle()

    def wait_for_var(self, var: Var) -> None:
        try:
            super().wait_for_var(var)
        finally:
            self._release_blas_if_idle()

    def wait_all(self) -> None:
        try:
            super().wait_all()
        finally:
            self._release_blas_if_idle()

    def _release_blas_if_idle(self) -> None:
        if not self._limits_blas:  # the common case needs no lock (checked again below)
            return
        with self._lock:
            if self._limits_blas and self._pending == 0:
                self._limits_blas = False
                _blas_limit.release()

    def __repr__(self) -> str:
        return f"<ThreadedEngine workers={self.workers} per device>"


class StepEngine(Engine):
    """Holds ready ops until ``step()``: the lazy queue made visible, for lessons.

    ``tasks`` lists every pushed task with its ``state`` and ``deps``; ``ready`` is the
    queue ``step()`` takes from. ``wait_for_var`` runs only the ops the Var needs.
    """

    _keep_history = True

    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[Task] = []
        self.ready: list[Task] = []
        self._unfinished: dict[int, Task] = {}  # by seq: what a wait may have to run

    def _register(self, task: Task) -> None:  # lock held: listed before any hook sees it
        self.tasks.append(task)
        self._unfinished[task.seq] = task

    def _submit(self, task: Task) -> None:
        self.ready.append(task)

    def _take(self, needed: set[int] | None = None) -> Task | None:
        with self._lock:
            for index, task in enumerate(self.ready):
                if needed is None or task.seq in needed:
                    return self.ready.pop(index)
        return None

    def step(self) -> TaskRecord | None:
        """Run the next ready op and return its record (None when nothing is ready).

        Ops skipped because of a failure are marked on the way and not counted.
        """
        while (task := self._take()) is not None:
            self._run(task, 0)
            if task.record is not None:
                return task.record
        return None

    def run(self) -> list[TaskRecord]:
        """Step until nothing is ready; return the records of the ops that ran."""
        records = []
        while (record := self.step()) is not None:
            records.append(record)
        return records

    def _complete(self, task: Task) -> None:
        super()._complete(task)
        del self._unfinished[task.seq]

    def _wait_task(self, task: Task) -> None:
        needed, todo = set(), [task.seq]
        while todo:  # the task and everything unfinished it (transitively) waits on
            seq = todo.pop()
            if seq in self._unfinished and seq not in needed:
                needed.add(seq)
                todo.extend(dep.seq for dep in self._unfinished[seq].deps)
        while task.dependents is not None and (ready := self._take(needed)) is not None:
            self._run(ready, 0)

    def _wait_idle(self) -> None:
        self.run()

    def clear(self) -> None:
        """Forget finished tasks (the list grows with every push otherwise)."""
        self.tasks = [t for t in self.tasks if t.state not in _FINISHED]
        self._cleared()


_ENGINES = {"NaiveEngine": NaiveEngine, "ThreadedEngine": ThreadedEngine,
            "ThreadedEnginePerDevice": ThreadedEngine,  # MXNet's default name
            "StepEngine": StepEngine}
_current: Engine | None = None


def _make(name_or_engine: str | Engine) -> Engine:
    if isinstance(name_or_engine, Engine):
        return name_or_engine
    if name_or_engine not in _ENGINES:
        raise UnknownEngineError(
            f"unknown engine type {name_or_engine!r} (from set_engine, HYBRIDLAB_ENGINE_TYPE "
            f"or MXNET_ENGINE_TYPE); valid: NaiveEngine, ThreadedEngine, StepEngine")
    engine: Engine = _ENGINES[name_or_engine]()
    return engine


def current() -> Engine:
    """The engine ops are pushed to (made from ``FLAGS['ENGINE_TYPE']`` on first use)."""
    own = _SCOPE.engine
    if own is not None:
        return own
    global _current
    if _current is None:
        _current = _make(config.flag("ENGINE_TYPE"))
    return _current


def set_engine(name_or_engine: str | Engine) -> Engine:
    """Switch engines: wait for the old one (its failures raise here), then switch.

    Callbacks added with :func:`follow` move from the old engine to the new one.
    """
    global _current
    new, old = _make(name_or_engine), _current
    if old is new:
        return new
    try:
        if old is not None:
            try:
                old.wait_all()
            finally:
                old.close()
    finally:
        _current = new
        for callback in _followers:
            if old is not None:
                old.remove_callback(callback)
            new.add_callback(callback)
    return new


_followers: list[Callback] = []  # callbacks that stay on whichever engine is current


def follow(callback: Callback) -> None:
    """Add ``callback`` to the current engine and, after a switch, to the new current one
    (the profiler records every op, whatever engine runs it)."""
    _followers.append(callback)
    current().add_callback(callback)


def unfollow(callback: Callback) -> None:
    """Stop following: remove ``callback`` from the current engine."""
    _followers.remove(callback)
    current().remove_callback(callback)


@contextlib.contextmanager
def own_engine() -> Iterator[Engine]:
    """This thread pushes to a NaiveEngine of its own inside (NOTE [Custom op names]);
    the callbacks that follow every engine (the profiler) see its ops too."""
    own, outer = NaiveEngine(), _SCOPE.engine
    for callback in _followers:
        own.add_callback(callback)
    _SCOPE.engine = own
    try:
        yield own
    finally:
        _SCOPE.engine = outer
        for callback in _followers:
            own.remove_callback(callback)


AnEngine = TypeVar("AnEngine", bound=Engine)


@overload
def engine_scope(name_or_engine: Literal["StepEngine"]) -> ContextManager[StepEngine]: ...
@overload
def engine_scope(name_or_engine: Literal["ThreadedEngine"]) -> ContextManager[ThreadedEngine]: ...
@overload
def engine_scope(name_or_engine: Literal["NaiveEngine"]) -> ContextManager[NaiveEngine]: ...
@overload
def engine_scope(name_or_engine: AnEngine) -> ContextManager[AnEngine]: ...
@overload
def engine_scope(name_or_engine: str) -> ContextManager[Engine]: ...
def engine_scope(name_or_engine: str | Engine) -> ContextManager[Engine]:
    """``with engine_scope("NaiveEngine"):`` runs the block on that engine, then switches back;
    ``as`` gives the engine, typed as the class named (a StepEngine has ``step``)."""
    return _engine_scope(name_or_engine)


@contextlib.contextmanager
def _engine_scope(name_or_engine: str | Engine) -> Iterator[Engine]:
    previous = current()
    engine = set_engine(name_or_engine)
    try:
        yield engine
    finally:
        set_engine(previous)


def push(fn: Callable[[], None], reads: Iterable[Var], writes: Iterable[Var],
         name: str = "op", device: Any = None, copy: bool = False) -> None:
    """Push ``fn`` to the current engine (see :meth:`Engine.push`)."""
    current().push(fn, reads, writes, name, device, copy)


def wait_for_var(var: Var) -> None:
    current().wait_for_var(var)


def reported_failure(var: Var) -> Task | None:
    """The failed op behind the last write of ``var``, once its failure has been reported.

    After the report the engine treats ``var`` as healthy again (see the rule), so it is
    the front end's job to notice that the buffer was never filled: ndarray asks here.
    """
    writer = var._writer
    failed = writer.failure if writer is not None else None
    return failed if failed is not None and failed.reported_at != _NEVER else None


def wait_all() -> None:
    current().wait_all()


def set_tracing(on: bool = True) -> None:
    current().set_tracing(on)


def clear_trace() -> None:
    current().clear_trace()


_BULK_SIZE = [0]


def set_bulk_size(size: int) -> int:
    """MXNet's ``mx.engine.set_bulk_size``; returns the previous size. MXNet groups up to
    ``size`` imperative ops into one engine task to save scheduling overhead; it changes
    no result. hybridlab's engines run every op as its own task (so traces and the queue
    stepper show each one), so the size is kept for the API and changes nothing."""
    previous, _BULK_SIZE[0] = _BULK_SIZE[0], int(size)
    return previous


@contextlib.contextmanager
def bulk(size: int) -> Iterator[None]:
    """``with mx.engine.bulk(size):`` (MXNet): see :func:`set_bulk_size`."""
    previous = set_bulk_size(size)
    try:
        yield
    finally:
        set_bulk_size(previous)


# NOTE [Forked children] A process made by fork() has only the thread that forked: the
# parent's worker threads are gone, and its queues and locks are copies that nobody will run
# or release. A child that used the parent's engine could wait forever for them. So after a
# fork the child forgets the engine; its first op makes a fresh one of the configured kind
# (gluon's DataLoader workers, or a user's own multiprocessing). Make the parent's arrays
# ready before forking (nd.waitall()): an op pending at the fork never runs in the child.
def _forget_after_fork() -> None:
    global _current
    _current = None


if hasattr(os, "register_at_fork"):  # (POSIX)
    os.register_at_fork(after_in_child=_forget_after_fork)
