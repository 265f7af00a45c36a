"""Datasets (``gluon.data``): anything with ``len(ds)`` and ``ds[i]``.

What this module teaches
------------------------
A *dataset* answers two questions, how many samples and which is sample ``i``; a loader
(dataloader.py) does the rest. Datasets compose lazily, as MXNet's do:
``ds.transform(fn)`` applies ``fn`` when a sample is read (``transform_first`` to its
first field only), ``filter``, ``shard`` and ``take`` choose samples by index -- nothing
is computed or copied until a sample is asked for.

:class:`ArrayDataset` zips arrays of equal length (the loader slices them a whole batch
at a time: one numpy fancy-index per array, not one Python call per sample);
:class:`SimpleDataset` wraps a list; :class:`RecordFileDataset` reads a record file
(``mx.recordio``) by index.

:func:`load_digits` gives the 8x8 handwritten digits of scikit-learn (1797 images,
shipped inside scikit-learn, so it loads offline) split into train and test sets.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from hybridlab import ndarray, recordio


class Dataset:
    """Base class: ``__getitem__`` and ``__len__``, and the lazy ways to derive a dataset."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def transform(self, fn: Callable[..., Any], lazy: bool = True) -> Dataset:
        """Each sample through ``fn`` (a tuple sample is passed as ``fn(*sample)``); with
        ``lazy=False`` every sample is computed now."""
        derived = _Transformed(self, fn)
        return derived if lazy else SimpleDataset([derived[i] for i in range(len(derived))])

    def transform_first(self, fn: Callable[[Any], Any], lazy: bool = True) -> Dataset:
        """``fn`` on the first field of each sample only (the data, not the label)."""
        return self.transform(_First(fn), lazy)

    def filter(self, fn: Callable[[Any], bool]) -> Dataset:
        """The samples for which ``fn(sample)`` is true (``fn`` is run on every sample now)."""
        return _Subset(self, [i for i in range(len(self)) if fn(self[i])])

    def shard(self, num_shards: int, index: int) -> Dataset:
        """The ``index``-th of ``num_shards`` consecutive pieces (the first pieces one
        sample longer when the length does not divide)."""
        if not 0 <= index < num_shards:
            raise ValueError(f"shard: index {index} must be in [0, {num_shards})")
        size, extra = divmod(len(self), num_shards)
        start = index * size + min(index, extra)
        return _Subset(self, list(range(start, start + size + (index < extra))))

    def take(self, count: int | None) -> Dataset:
        """The first ``count`` samples (all of them for None or a count beyond the end)."""
        if count is None or count >= len(self):
            return self
        return _Subset(self, list(range(count)))

    def sample(self, sampler: Any) -> Dataset:
        """The samples at the indices ``sampler`` yields, in its order."""
        return _Subset(self, list(sampler))


class _First:
    """A picklable ``transform_first`` function (workers may need to receive it)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, first: Any, *rest: Any) -> Any:
        return (self.fn(first), *rest) if rest else self.fn(first)


class _Transformed(Dataset):
    def __init__(self, base: Any, fn: Callable[..., Any]) -> None:
        self.base, self.fn = base, fn

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index: int) -> Any:
        item = self.base[index]
        return self.fn(*item) if isinstance(item, tuple) else self.fn(item)


class _Subset(Dataset):
    def __init__(self, base: Any, indices: list[int]) -> None:
        self.base, self.indices = base, indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> Any:
        return self.base[self.indices[index]]


class SimpleDataset(Dataset):
    """A dataset over a list (or anything indexable with a length)."""

    def __init__(self, data: Any) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, index: int) -> Any:
        return self._data[index]


class ArrayDataset(Dataset):
    """``ArrayDataset(X, y)[i] == (X[i], y[i])``; arrays may be NDArrays, numpy arrays or
    lists (a list of samples; a dataset too). One array gives its items alone."""

    def __init__(self, *arrays: Any) -> None:
        if not arrays:
            raise ValueError("ArrayDataset needs at least one array")
        self._arrays = [a.asnumpy() if isinstance(a, ndarray.NDArray) else
                        a if isinstance(a, (Dataset, list)) else np.asarray(a) for a in arrays]
        lengths = {len(a) for a in self._arrays}
        if len(lengths) != 1:
            raise ValueError(f"ArrayDataset: all arrays need the same length, got "
                             f"{[len(a) for a in self._arrays]}")

    def __len__(self) -> int:
        return len(self._arrays[0])

    def __getitem__(self, index: Any) -> Any:
        items = tuple(a[index] if isinstance(a, np.ndarray) or not isinstance(index, np.ndarray)
                      else [a[int(i)] for i in index] for a in self._arrays)
        return items[0] if len(items) == 1 else items

    def sliceable(self) -> bool:
        """Whether a batch can be taken with one numpy index per array (the loader's fast
        path): only numpy arrays inside."""
        return all(isinstance(a, np.ndarray) for a in self._arrays)


class RecordFileDataset(Dataset):
    """The records of a record file (``filename``, its index beside it as ``.idx``), each
    read by index as bytes (``recordio.unpack`` takes a packed one apart)."""

    def __init__(self, filename: str) -> None:
        self.idx_file = filename[:filename.rfind(".")] + ".idx" if "." in filename \
            else filename + ".idx"
        self.filename = filename
        self._record = recordio.MXIndexedRecordIO(self.idx_file, filename, "r")

    def __len__(self) -> int:
        return len(self._record.keys)

    def __getitem__(self, index: int) -> Any:
        return self._record.read_idx(self._record.keys[index])


def load_digits(test_fraction: float = 0.25, seed: int = 0) -> tuple[ArrayDataset, ArrayDataset]:
    """scikit-learn's 8x8 digits as ``(train, test)`` ArrayDatasets of (image, label).

    Images are float32 in [0, 1] with shape (64,); labels are float32 class indices.
    The split is a fixed permutation drawn from ``seed``.
    """
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError:
        raise ImportError("the digits data set ships with scikit-learn, which is not "
                          "installed: pip install scikit-learn  (or, in the hybridlab "
                          "checkout, pip install -e '.[notebooks]')") from None
    digits = sklearn_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = int(len(labels) * (1 - test_fraction))
    train, test = order[:cut], order[cut:]
    return ArrayDataset(images[train], labels[train]), ArrayDataset(images[test], labels[test])
