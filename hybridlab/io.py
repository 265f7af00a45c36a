"""Data iterators (``mx.io``): batches for the symbolic training loop of MXNet 1.x.

What this module teaches
------------------------
Before Gluon's ``DataLoader``, MXNet fed ``mx.mod.Module`` with *data iterators*: an
object that yields :class:`DataBatch` es (a list of data arrays, a list of label arrays,
and ``pad``: how many samples at the end of the last batch are filler) and describes them
in advance (``provide_data`` / ``provide_label``: a :class:`DataDesc` per input, its
name and batch shape), because a symbolic program is *bound* to fixed shapes before the
first batch arrives. :class:`NDArrayIter` is the in-memory one:

* every batch has exactly ``batch_size`` samples (a bound executor cannot take fewer);
* ``last_batch_handle`` decides what happens to the rest of an epoch: ``'pad'`` fills the
  last batch from the start of the data (``batch.pad`` says how many are repeats, so
  ``Module.predict`` and ``score`` can leave them out), ``'discard'`` drops it,
  ``'roll_over'`` keeps it and starts the next epoch with it;
* ``shuffle=True`` reorders the samples at every ``reset()`` (numpy's global generator,
  as MXNet did: ``np.random.seed`` fixes it).
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import Any, Iterator

import numpy as np

from hybridlab import ndarray as nd


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """An input's name and shape (with ``dtype`` and ``layout``, 'NCHW' by default)."""

    dtype: Any
    layout: str

    def __new__(cls, name: str, shape: tuple, dtype: Any = np.float32,
                layout: str = "NCHW") -> DataDesc:
        desc = super().__new__(cls, name, tuple(shape))
        desc.dtype, desc.layout = dtype, layout
        return desc

    def __repr__(self) -> str:
        return (f"DataDesc[{self.name},{self.shape},{np.dtype(self.dtype).name},"
                f"{self.layout}]")

    @staticmethod
    def get_batch_axis(layout: str | None) -> int:
        return 0 if layout is None else layout.find("N")

    @staticmethod
    def get_list(shapes: list, types: list | None) -> list:
        """``DataDesc`` s from ``(name, shape)`` pairs and optional ``(name, dtype)`` pairs."""
        dtypes = dict(types or [])
        return [DataDesc(name, shape, dtypes.get(name, np.float32)) for name, shape in shapes]


class DataBatch:
    """One batch: ``data`` and ``label`` (lists of NDArrays), ``pad`` (filler samples at
    the end), and for bucketing its ``bucket_key`` and shapes."""

    def __init__(self, data: list, label: list | None = None, pad: int | None = None,
                 index: Any = None, bucket_key: Any = None, provide_data: list | None = None,
                 provide_label: list | None = None) -> None:
        if data is not None and not isinstance(data, (list, tuple)):
            raise TypeError("DataBatch: data must be a list of NDArrays, e.g. "
                            "DataBatch([x], [y])")
        if label is not None and not isinstance(label, (list, tuple)):
            raise TypeError("DataBatch: label must be a list of NDArrays (or None)")
        self.data, self.label, self.pad, self.index = data, label, pad, index
        self.bucket_key = bucket_key
        self.provide_data, self.provide_label = provide_data, provide_label

    def __str__(self) -> str:
        shapes = [d.shape for d in self.data]
        labels = [x.shape for x in self.label] if self.label else None
        return f"DataBatch: data shapes: {shapes} label shapes: {labels}"


class DataIter:
    """The base of every iterator: ``for batch in it`` (and ``next``, ``reset``)."""

    def __init__(self, batch_size: int = 0) -> None:
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[DataBatch]:
        return self

    def reset(self) -> None:
        """Start the next epoch."""

    def next(self) -> DataBatch:
        if self.iter_next():
            return DataBatch(self.getdata(), self.getlabel(), self.getpad(), self.getindex())
        raise StopIteration

    def __next__(self) -> DataBatch:
        return self.next()

    def iter_next(self) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must define next() or iter_next()")

    def getdata(self) -> list:
        raise NotImplementedError

    def getlabel(self) -> list:
        raise NotImplementedError

    def getindex(self) -> Any:
        return None

    def getpad(self) -> int:
        raise NotImplementedError


def _named_arrays(given: Any, default_name: str, allow_empty: bool) -> list[tuple[str, Any]]:
    """``given`` (an array, a list of arrays, or a dict by name) as ``(name, numpy)`` pairs:
    one array is ``default_name``; several are ``_0_<name>``, ``_1_<name>`` ... as MXNet."""
    if given is None:
        if not allow_empty:
            raise ValueError("NDArrayIter: data is required (an array, a list or a dict)")
        return []
    if isinstance(given, (np.ndarray, nd.NDArray)) or not isinstance(given, (list, tuple,
                                                                             dict)):
        given = [given]
    if isinstance(given, (list, tuple)):
        names = [default_name] if len(given) == 1 else [f"_{i}_{default_name}"
                                                        for i in range(len(given))]
        given = OrderedDict(zip(names, given))
    pairs = []
    for name, value in given.items():
        array = value.asnumpy() if isinstance(value, nd.NDArray) else np.asarray(value)
        if array.ndim == 0:
            raise ValueError(f"NDArrayIter: {name!r} needs a batch axis, got a scalar")
        pairs.append((name, array))
    return pairs


class NDArrayIter(DataIter):
    """Batches of ``batch_size`` samples from arrays in memory (see the module docstring)."""

    def __init__(self, data: Any, label: Any = None, batch_size: int = 1, shuffle: bool = False,
                 last_batch_handle: str = "pad", data_name: str = "data",
                 label_name: str = "softmax_label", layout: str = "NCHW") -> None:
        super().__init__(batch_size)
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError(f"NDArrayIter: last_batch_handle={last_batch_handle!r}; use "
                             f"'pad', 'discard' or 'roll_over'")
        self.data = _named_arrays(data, data_name, allow_empty=False)
        self.label = _named_arrays(label, label_name, allow_empty=True)
        # the first data array sets the number of samples, as in MXNet (a longer label
        # array is read from its start); a shorter one cannot serve every batch
        self.num_data = len(self.data[0][1])
        short = [(n, len(a)) for n, a in self.data + self.label if len(a) < self.num_data]
        if short:
            raise ValueError(f"NDArrayIter: {self.data[0][0]!r} has {self.num_data} samples "
                             f"but {short} fewer: give every array one row per sample")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"NDArrayIter: batch_size must be a positive int, got "
                             f"{batch_size!r}")
        self.shuffle, self.last_batch_handle, self.layout = shuffle, last_batch_handle, layout
        self.idx = np.arange(self.num_data)
        self.cursor = -batch_size
        self._carried: np.ndarray | None = None  # roll_over: the last epoch's rest
        self.reset()

    def _descs(self, pairs: list) -> list[DataDesc]:
        return [DataDesc(name, (self.batch_size, *array.shape[1:]), array.dtype, self.layout)
                for name, array in pairs]

    @property
    def provide_data(self) -> list[DataDesc]:
        return self._descs(self.data)

    @property
    def provide_label(self) -> list[DataDesc]:
        return self._descs(self.label)

    def hard_reset(self) -> None:
        """Start again from the first sample, forgetting a rolled-over rest."""
        self._carried = None
        self.cursor = -self.batch_size
        if self.shuffle:
            np.random.shuffle(self.idx)

    def reset(self) -> None:
        if self.shuffle:
            np.random.shuffle(self.idx)
        self.cursor = -self.batch_size

    def iter_next(self) -> bool:
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        rows, pad = self._rows()
        if self._carried is not None and self.cursor == 0:  # the rest came first
            self.cursor -= len(self._carried)
            self._carried = None
        if len(rows) < self.batch_size:  # discard, or roll_over keeping the rest
            if self.last_batch_handle == "roll_over":
                self._carried = rows
            raise StopIteration
        return DataBatch(self._take(self.data, rows), self._take(self.label, rows), pad)

    def _rows(self) -> tuple[np.ndarray, int]:
        """The sample indices of the batch at the cursor, and how many are padding."""
        rows = self.idx[self.cursor:self.cursor + self.batch_size]
        if self._carried is not None and self.cursor == 0:
            rows = np.concatenate([self._carried, rows])[:self.batch_size]
        missing = self.batch_size - len(rows)
        if missing and self.last_batch_handle == "pad":
            return np.concatenate([rows, np.resize(self.idx, missing)]), missing
        return rows, 0

    @staticmethod
    def _take(pairs: list, rows: np.ndarray) -> list:
        return [nd.array(array[rows], dtype=array.dtype) for _, array in pairs]

    def getdata(self) -> list:
        return self._take(self.data, self._rows()[0])

    def getlabel(self) -> list:
        return self._take(self.label, self._rows()[0])

    def getpad(self) -> int:
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        return 0


class ResizeIter(DataIter):
    """``size`` batches per epoch from ``data_iter``, restarting it when it runs out."""

    def __init__(self, data_iter: DataIter, size: int, reset_internal: bool = True) -> None:
        super().__init__(data_iter.batch_size)
        self.data_iter, self.size, self.reset_internal = data_iter, size, reset_internal
        self.cur = 0
        self.provide_data = getattr(data_iter, "provide_data", None)
        self.provide_label = getattr(data_iter, "provide_label", None)

    def reset(self) -> None:
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def next(self) -> DataBatch:
        if self.cur == self.size:
            raise StopIteration
        self.cur += 1
        try:
            return self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            return self.data_iter.next()
