"""The DataLoader (``gluon.data``): batches of a dataset, in this process or in workers.

What this module teaches
------------------------
A loader asks a batch sampler for index lists, reads those samples from the dataset and
*batchifies* them (stacks the samples into one array per field). With ``num_workers=0``
that happens in the caller, between training steps. With ``num_workers=N`` it happens in N
**worker processes** while the caller trains: up to ``prefetch`` batches (2N by default:
a bounded queue, so a slow consumer cannot make memory grow) are in flight, and each batch
comes back in order. ``thread_pool=True`` uses threads instead (no copying of the
dataset; but Python code in ``__getitem__`` then shares the GIL with training).

NOTE [Starting workers safely] hybridlab's ThreadedEngine runs worker *threads* that take
locks. ``fork`` copies a process with only the thread that called it: a lock another thread
held at that instant stays locked forever in the child, and an op still pending in the
parent never runs there. So, as MXNet does, the loader first waits for the engine
(``nd.waitall()``: every array the dataset holds has its values, and the engine's threads
are idle), then forks its workers; in each child the engine forgets the parent's threads
and queues (NOTE [Forked children] in engine.py) and the worker runs a fresh NaiveEngine.
Forking keeps MXNet's convenience: the dataset and ``batchify_fn`` are inherited, not
pickled, so lambdas and classes defined in a notebook work. (Where there is no fork --
Windows, macOS's default -- workers are spawned and the dataset must be picklable; the
loader says so at once if it is not.) Workers ignore Ctrl-C (the caller handles it); the
pool is terminated and its processes reaped when the loader is closed or collected, and a
worker whose parent died exits (its task pipe closes), so none outlives the caller.

A worker's error is raised in the caller, with the worker's traceback as its cause and a
note naming the samples of the batch. Batches come back as numpy arrays and become NDArrays
in the caller (on ``cpu(0)``; ``pin_memory`` names ``cpu_pinned``, the same memory here).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import signal
import threading
import time
import traceback
from typing import Any, Callable, Iterator

import numpy as np

from hybridlab import context, engine, ndarray
from hybridlab.gluon.data.dataset import ArrayDataset
from hybridlab.gluon.data.sampler import BatchSampler, RandomSampler, SequentialSampler


def default_batchify_fn(data: list) -> Any:
    """Stack samples into a batch: NDArrays with ``nd.stack``, tuples field by field (a
    list of batches), anything else through numpy."""
    first = data[0]
    if isinstance(first, ndarray.NDArray):
        return ndarray.stack(*data)  # type: ignore[attr-defined]  # (generated)
    if isinstance(first, (tuple, list)):
        return [default_batchify_fn(list(field)) for field in zip(*data)]
    array = np.asarray(data)
    return ndarray.array(array, dtype=array.dtype)


def default_mp_batchify_fn(data: list) -> Any:
    """:func:`default_batchify_fn` for a worker process: numpy arrays (the caller makes
    the NDArrays; a worker's engine is not the caller's)."""
    first = data[0]
    if isinstance(first, ndarray.NDArray):
        return np.stack([x.asnumpy() for x in data])
    if isinstance(first, (tuple, list)):
        return [default_mp_batchify_fn(list(field)) for field in zip(*data)]
    return np.asarray(data)


def _as_ndarrays(batch: Any, ctx: Any) -> Any:
    if isinstance(batch, np.ndarray):
        return ndarray.array(batch, ctx=ctx, dtype=batch.dtype)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_as_ndarrays(part, ctx) for part in batch)
    if isinstance(batch, ndarray.NDArray) and batch.context != ctx:
        return batch.as_in_context(ctx)
    return batch


# -- the workers (NOTE [Starting workers safely]) ---------------------------------------------
class _Pickled:
    """A spawned worker's dataset: unpickled in the worker (a failure is then a batch's
    error, said in the caller, not a worker that cannot start)."""

    def __init__(self, data: bytes) -> None:
        self.data = data


class _Failure:
    """A worker's exception as it travels back: the exception itself when it pickles, and
    the worker's traceback as text."""

    def __init__(self, error: BaseException) -> None:
        self.text = traceback.format_exc()
        try:
            self.error: BaseException | None = pickle.loads(pickle.dumps(error))
        except Exception:
            self.error = None
        self.kind = f"{type(error).__name__}: {error}"

    def exception(self, indices: list) -> BaseException:
        error = self.error or RuntimeError(self.kind)
        shown = list(indices[:8]) + (["..."] if len(indices) > 8 else [])
        error.add_note(f"(raised in a DataLoader worker, reading the samples {shown}; the "
                       f"worker's traceback:)\n{self.text}")
        return error


def _work(dataset: Any, batchify_fn: Any, tasks: Any, results: Any, parent: int,
          process: bool) -> None:
    """A worker's loop: ``(key, indices)`` in, ``(key, batch, failure)`` out; None ends
    it, and a worker process whose caller is gone ends too."""
    if process:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
        engine.set_engine("NaiveEngine")
        # a worker ends only when the loader stops (or its caller died): batches it made
        # that nobody will read must not keep it alive, flushing into a full pipe
        results.cancel_join_thread()
    if isinstance(dataset, _Pickled):
        dataset, batchify_fn = pickle.loads(dataset.data)
    while True:
        try:
            task = tasks.get(timeout=1.0)
        except queue.Empty:
            if process and os.getppid() != parent:
                return
            continue
        if task is None:
            return
        key, indices = task
        try:
            results.put((key, batchify_fn([dataset[i] for i in indices]), None))
        except Exception as error:
            results.put((key, None, _Failure(error)))


class _Workers:
    """``count`` worker processes (or threads), each with its own bounded task queue, and
    one queue of results."""

    def __init__(self, count: int, dataset: Any, batchify_fn: Any, threads: bool,
                 start_method: str) -> None:
        self.threads = threads
        if threads:
            make_queue: Any = queue.Queue
            make: Any = threading.Thread
        else:
            context_: Any = multiprocessing.get_context(start_method)
            make_queue, make = context_.Queue, context_.Process
        self.results = make_queue()
        self.tasks = [make_queue() for _ in range(count)]
        self.workers = [make(target=_work, args=(dataset, batchify_fn, tasks, self.results,
                                                 os.getpid(), not threads), daemon=True)
                        for tasks in self.tasks]
        for worker in self.workers:
            worker.start()

    def receive(self, timeout: float) -> tuple:
        """The next result; a dead worker or ``timeout`` seconds without one is an error."""
        waited = 0.0
        while True:
            try:
                return self.results.get(timeout=1.0)  # type: ignore[no-any-return]
            except queue.Empty:
                waited += 1.0
            dead = [w for w in self.workers if not w.is_alive()]
            if dead:
                codes = [getattr(w, "exitcode", None) for w in dead]
                raise RuntimeError(f"DataLoader: {len(dead)} worker(s) ended unexpectedly "
                                   f"(exit codes {codes}): killed, or out of memory?")
            if waited >= timeout:
                raise TimeoutError(f"DataLoader: no batch from the workers for {timeout} s; "
                                   f"give a larger timeout= for slow samples")

    def stop(self) -> None:
        """Ask every worker to end, then end the processes that do not within a second."""
        for tasks in self.tasks:
            tasks.put(None)
        deadline = time.monotonic() + 1.0
        for worker in self.workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        for worker in self.workers:
            if worker.is_alive() and not self.threads:
                worker.terminate()
                worker.join()
        if not self.threads:  # (their feeder threads must not wait for readers now gone)
            for queue_ in [*self.tasks, self.results]:
                queue_.cancel_join_thread()
                queue_.close()


def _start_method() -> str:
    """``fork`` where the platform has it and uses it (NOTE [Starting workers safely])."""
    return "fork" if multiprocessing.get_start_method(allow_none=True) in (None, "fork") \
        and "fork" in multiprocessing.get_all_start_methods() else "spawn"


def _pickled(dataset: Any, batchify_fn: Any) -> _Pickled:
    """The dataset (and batchify_fn) as spawned workers receive them, or a clear error."""
    try:
        return _Pickled(pickle.dumps((dataset, batchify_fn)))
    except (pickle.PicklingError, AttributeError, TypeError) as error:
        raise TypeError(f"DataLoader(num_workers>0) sends the dataset and batchify_fn to "
                        f"spawned worker processes by pickle, and this one cannot be pickled "
                        f"({error}). Fix: define functions and Dataset classes at module "
                        f"level (not lambdas, not in a notebook cell), or use "
                        f"thread_pool=True") from None


class DataLoader:
    """``DataLoader(dataset, batch_size, shuffle=False, ...)``: batches as NDArrays.

    ``last_batch`` is ``'keep'`` (default), ``'discard'`` or ``'rollover'``; ``sampler`` or
    ``batch_sampler`` replace the default order; ``batchify_fn`` builds a batch from a list
    of samples; ``num_workers`` processes (or threads, ``thread_pool=True``) prepare
    ``prefetch`` batches ahead (see the module docstring).
    """

    def __init__(self, dataset: Any, batch_size: int | None = None, shuffle: bool = False,
                 sampler: Any = None, last_batch: str | None = None, batch_sampler: Any = None,
                 batchify_fn: Callable[[list], Any] | None = None, num_workers: int = 0,
                 pin_memory: bool = False, pin_device_id: int = 0, prefetch: int | None = None,
                 thread_pool: bool = False, timeout: float = 120,
                 auto_reload: bool = False) -> None:
        self._dataset = dataset
        self._batch_sampler = self._batches(dataset, batch_size, shuffle, sampler,
                                            last_batch, batch_sampler)
        if not timeout > 0:
            raise ValueError(f"DataLoader: timeout must be positive seconds, got {timeout!r}")
        self._timeout, self._thread_pool = timeout, thread_pool
        self._num_workers = max(0, int(num_workers))
        self._prefetch = max(1, int(prefetch) if prefetch is not None else 2 * self._num_workers)
        self._ctx = context.cpu_pinned(pin_device_id) if pin_memory else context.cpu()
        self._batchify_fn = batchify_fn
        self._workers: _Workers | None = None
        self._epoch = 0
        self._forks = _start_method() == "fork"
        if self._num_workers and not thread_pool and not self._forks:  # said now
            self._payload = _pickled(dataset, batchify_fn or default_mp_batchify_fn)

    @staticmethod
    def _batches(dataset: Any, batch_size: Any, shuffle: bool, sampler: Any,
                 last_batch: Any, batch_sampler: Any) -> Any:
        if batch_sampler is not None:
            if batch_size is not None or shuffle or sampler is not None or last_batch:
                raise ValueError("DataLoader: batch_size, shuffle, sampler and last_batch "
                                 "cannot be given with batch_sampler (it decides all four)")
            return batch_sampler
        if batch_size is None:
            raise ValueError("DataLoader: give batch_size (or a batch_sampler)")
        if sampler is None:
            sampler = RandomSampler(len(dataset)) if shuffle else SequentialSampler(len(dataset))
        elif shuffle:
            raise ValueError("DataLoader: shuffle cannot be given with a sampler (the sampler "
                             "decides the order)")
        return BatchSampler(sampler, batch_size, last_batch or "keep")

    def __len__(self) -> int:
        return len(self._batch_sampler)

    def __iter__(self) -> Iterator[Any]:
        if self._num_workers == 0:
            return self._here()
        return self._in_workers()

    def _here(self) -> Iterator[Any]:
        fast = self._batchify_fn is None and isinstance(self._dataset, ArrayDataset) \
            and self._dataset.sliceable()
        for indices in self._batch_sampler:
            if fast:  # one numpy index per array, not one Python call per sample
                items = self._dataset[np.asarray(indices)]
                batch = _as_ndarrays(list(items) if isinstance(items, tuple) else items,
                                     self._ctx)
            else:
                batch = (self._batchify_fn or default_batchify_fn)(
                    [self._dataset[i] for i in indices])
            yield _as_ndarrays(batch, self._ctx)

    def _start_workers(self) -> _Workers:
        if self._workers is None:
            batchify = self._batchify_fn or (default_batchify_fn if self._thread_pool
                                             else default_mp_batchify_fn)
            if self._thread_pool:
                dataset = self._dataset
            else:  # NOTE [Starting workers safely]: the engine idle before forking
                ndarray.waitall()
                dataset = self._dataset if self._forks else self._payload
            self._workers = _Workers(self._num_workers, dataset, batchify, self._thread_pool,
                                     "fork" if self._forks else "spawn")
        return self._workers

    def _in_workers(self) -> Iterator[Any]:
        """Batches from the workers, in order, at most ``prefetch`` in flight; results of
        an earlier iteration left unread are told apart by its number and dropped."""
        workers = self._start_workers()
        self._epoch += 1
        epoch, batches = self._epoch, enumerate(self._batch_sampler)
        sent: dict[int, list] = {}
        arrived: dict[int, tuple] = {}

        def send() -> None:
            item = next(batches, None)
            if item is not None:
                number, indices = item
                sent[number] = list(indices)
                workers.tasks[number % len(workers.tasks)].put(((epoch, number), sent[number]))

        for _ in range(self._prefetch):
            send()
        number = 0
        while number in sent:
            while number not in arrived:
                (which, key), batch, failure = workers.receive(self._timeout)
                if which == epoch:
                    arrived[key] = (batch, failure)
            batch, failure = arrived.pop(number)
            send()
            if failure is not None:
                raise failure.exception(sent[number])
            del sent[number]
            number += 1
            yield _as_ndarrays(batch, self._ctx)

    def close(self) -> None:
        """Stop the workers now (and wait for their processes to end)."""
        workers, self._workers = self._workers, None
        if workers is not None:
            workers.stop()

    def __enter__(self) -> DataLoader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # (at interpreter exit multiprocessing may be torn down already)
            pass
