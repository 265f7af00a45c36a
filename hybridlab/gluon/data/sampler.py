"""Samplers (``gluon.data``): which sample indices, in which order, in which batches.

A sampler is an iterable of indices with a length. :class:`SequentialSampler` and
:class:`RandomSampler` (a new permutation every epoch, from numpy's global generator, as
MXNet: ``np.random.seed`` fixes it) order the samples; :class:`BatchSampler` groups them
into lists of ``batch_size``, with ``last_batch`` deciding the rest of an epoch: ``'keep'``
(a smaller last batch), ``'discard'``, or ``'rollover'`` (the rest starts the next epoch).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np


class Sampler:
    """Base class: ``__iter__`` (indices) and ``__len__``."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")


class SequentialSampler(Sampler):
    """``start, start + 1, ..., start + length - 1``."""

    def __init__(self, length: int, start: int = 0) -> None:
        self._length, self._start = length, start

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._start, self._start + self._length))

    def __len__(self) -> int:
        return self._length


class RandomSampler(Sampler):
    """``0 .. length - 1`` in a new random order each time it is iterated."""

    def __init__(self, length: int) -> None:
        self._length = length

    def __iter__(self) -> Iterator[int]:
        return iter(np.random.permutation(self._length).tolist())

    def __len__(self) -> int:
        return self._length


class FilterSampler(Sampler):
    """The indices of the samples of ``dataset`` for which ``fn(sample)`` is true."""

    def __init__(self, fn: Callable[[Any], bool], dataset: Any) -> None:
        self._indices = [i for i in range(len(dataset)) if fn(dataset[i])]

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices)

    def __len__(self) -> int:
        return len(self._indices)


class IntervalSampler(Sampler):
    """Every ``interval``-th index: ``0, k, 2k, ...`` then (with ``rollover``) ``1, k+1,
    ...``, until every index was given (MXNet's ``gluon.contrib.data.IntervalSampler``)."""

    def __init__(self, length: int, interval: int, rollover: bool = True) -> None:
        if not 0 < interval <= length:
            raise ValueError(f"IntervalSampler: interval {interval} must be in (0, {length}]")
        self._length, self._interval, self._rollover = length, interval, rollover

    def __iter__(self) -> Iterator[int]:
        for start in range(self._interval if self._rollover else 1):
            yield from range(start, self._length, self._interval)

    def __len__(self) -> int:
        return self._length if self._rollover else len(range(0, self._length, self._interval))


class BatchSampler(Sampler):
    """The indices of ``sampler`` in lists of ``batch_size`` (see the module docstring)."""

    def __init__(self, sampler: Any, batch_size: int, last_batch: str = "keep") -> None:
        if last_batch not in ("keep", "discard", "rollover"):
            raise ValueError(f"last_batch must be 'keep', 'discard' or 'rollover', got "
                             f"{last_batch!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got "
                             f"{batch_size!r} (the number of samples per batch, e.g. 32)")
        self._sampler, self._batch_size, self._last_batch = sampler, int(batch_size), last_batch
        self._prev: list[Any] = []

    def __iter__(self) -> Iterator[list[Any]]:
        batch, self._prev = self._prev, []
        for index in self._sampler:
            batch.append(index)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == "keep":
                yield batch
            elif self._last_batch == "rollover":
                self._prev = batch

    def __len__(self) -> int:
        if self._last_batch == "keep":
            return (len(self._sampler) + self._batch_size - 1) // self._batch_size
        if self._last_batch == "discard":
            return len(self._sampler) // self._batch_size
        return (len(self._prev) + len(self._sampler)) // self._batch_size
