"""Datasets and the DataLoader (``gluon.data``).

What this module teaches
------------------------
A *dataset* is anything with ``len(ds)`` and ``ds[i]``; a *loader* turns it into
batches of NDArrays. :class:`ArrayDataset` zips arrays of equal length, and the loader
slices them a whole batch at a time (one numpy fancy-index per array, not one Python
call per sample), so feeding data costs little next to the model.

:func:`load_digits` gives the 8x8 handwritten digits of scikit-learn (1797 images,
shipped inside scikit-learn, so it loads offline) split into train and test sets.
Shuffling uses numpy's global generator, as MXNet did: ``np.random.seed(0)`` fixes it.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from hybridlab import ndarray


class Dataset:
    """Base class: ``__getitem__`` and ``__len__``."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class ArrayDataset(Dataset):
    """``ArrayDataset(X, y)[i] == (X[i], y[i])``; arrays may be NDArrays or numpy arrays."""

    def __init__(self, *arrays: Any) -> None:
        if not arrays:
            raise ValueError("ArrayDataset needs at least one array")
        self._arrays = [a.asnumpy() if isinstance(a, ndarray.NDArray) else np.asarray(a)
                        for a in arrays]
        lengths = {len(a) for a in self._arrays}
        if len(lengths) != 1:
            raise ValueError(f"ArrayDataset: all arrays need the same length, got "
                             f"{[len(a) for a in self._arrays]}")

    def __len__(self) -> int:
        return len(self._arrays[0])

    def __getitem__(self, index: Any) -> Any:
        items = tuple(a[index] for a in self._arrays)
        return items[0] if len(items) == 1 else items


class DataLoader:
    """Batches of ``batch_size`` samples as NDArrays; ``shuffle`` reorders every epoch.

    ``last_batch`` is ``'keep'`` (a smaller last batch), ``'discard'`` or ``'rollover'``
    (treated like discard: hybridlab keeps no state between epochs).
    """

    def __init__(self, dataset: Any, batch_size: int, shuffle: bool = False,
                 last_batch: str = "keep") -> None:
        if last_batch not in ("keep", "discard", "rollover"):
            raise ValueError(f"last_batch must be 'keep', 'discard' or 'rollover', "
                             f"got {last_batch!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got "
                             f"{batch_size!r} (the number of samples per batch, e.g. 32)")
        self._dataset, self._batch_size = dataset, int(batch_size)
        self._shuffle, self._keep_last = shuffle, last_batch == "keep"

    def __len__(self) -> int:
        full, rest = divmod(len(self._dataset), self._batch_size)
        return full + (1 if rest and self._keep_last else 0)

    def __iter__(self) -> Iterator[Any]:
        count = len(self._dataset)
        order = np.random.permutation(count) if self._shuffle else np.arange(count)
        for start in range(0, count, self._batch_size):
            indices = order[start:start + self._batch_size]
            if len(indices) < self._batch_size and not self._keep_last:
                return
            yield self._batch(indices)

    def _batch(self, indices: np.ndarray) -> Any:
        if isinstance(self._dataset, ArrayDataset):
            items = self._dataset[indices]
            items = items if isinstance(items, tuple) else (items,)
        else:
            samples = [self._dataset[int(i)] for i in indices]
            items = tuple(np.stack(column) for column in zip(*samples)) \
                if isinstance(samples[0], tuple) else (np.stack(samples),)
        batch = tuple(ndarray.array(np.ascontiguousarray(a), dtype=a.dtype) for a in items)
        return batch[0] if len(batch) == 1 else batch


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
