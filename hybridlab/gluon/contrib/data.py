"""MXNet's ``gluon.contrib.data``: the interval sampler (it lives in ``gluon.data.sampler``),
a text that ships with Python, and buckets of lengths.

What this module teaches
------------------------
A language model needs text. :func:`python_docs` returns text every Python installation
carries: the standard library's ``pydoc_data.topics``, the pages ``help()`` shows for
keywords and topics (several hundred thousand characters of Python's own documentation),
read from the running interpreter, so nothing is downloaded (MXNet's ``contrib.data``
offered WikiText-2, a download). :class:`CharVocab` numbers its characters, keeping
index 0 for padding.

Sequences come in many lengths, and a hybridized network compiles one program per input
shape: a batch of every length would cost a compile per length. *Bucketing* (MXNet's
``BucketingModule``, GluonNLP's ``FixedBucketSampler``) groups the lengths into a few
buckets; each batch is drawn from one bucket and padded to the bucket's *key*, its
longest length, so a network sees one shape per bucket:

* :func:`bucket_keys` chooses the keys -- ``"equal width"`` (keys evenly spaced up to the
  longest length) or ``"equal count"`` (about as many sequences in each bucket);
* :class:`FixedBucketSampler` is a batch sampler (as ``gluon.data.BatchSampler``, it
  yields lists of indices, so ``DataLoader(batch_sampler=...)`` takes it): every batch
  comes from one bucket;
* :func:`pad` pads a batch to its bucket's key and returns the valid lengths, which a
  mask reads so that padding adds nothing to the loss.

More buckets waste less padding and compile more programs; ``hybridlab.lab.buckets``
models the trade-off and ``viz.buckets`` lets you play with it.

Invariants
----------
* A key is an upper bound, inclusive: a sequence of length ``n`` goes to the first bucket
  whose key is ``>= n``; the last key is the longest length, so every sequence has one.
* Shuffling uses numpy's global generator, as MXNet did: ``np.random.seed(0)`` fixes it.
"""

from __future__ import annotations

import bisect
import math
from typing import Any, Iterator, Sequence

import numpy as np

from hybridlab.gluon.data.sampler import IntervalSampler, Sampler

__all__ = ["CharVocab", "FixedBucketSampler", "IntervalSampler", "SPACINGS", "bucket_keys",
           "bucket_of", "pad", "python_docs"]

SPACINGS = ("equal width", "equal count")
PAD = "\x00"  # the character at index 0: padding, never in the text


def python_docs() -> str:
    """The text of ``pydoc_data.topics`` (this interpreter's), topics in name order,
    separated by blank lines."""
    try:
        from pydoc_data.topics import topics
    except ImportError as err:  # some distributions split the standard library
        raise ImportError(
            "python_docs needs the standard library's pydoc_data package, which this Python "
            "installation leaves out. Fix: install your distribution's full standard library "
            "(Debian: apt-get install libpython3-stdlib) or use Python from python.org"
        ) from err
    return "\n\n".join(topics[name].strip("\n") for name in sorted(topics))


class CharVocab:
    """Characters <-> indices: index 0 is padding, then the text's characters by code point."""

    def __init__(self, text: str) -> None:
        if PAD in text:
            raise ValueError("CharVocab: the text contains '\\x00', the padding character")
        self.idx_to_char = [PAD] + sorted(set(text))
        self.char_to_idx = {char: index for index, char in enumerate(self.idx_to_char)}

    def __len__(self) -> int:
        return len(self.idx_to_char)

    def encode(self, text: str) -> np.ndarray:
        """The indices of ``text``'s characters (int32)."""
        unknown = sorted(set(text) - self.char_to_idx.keys())
        if unknown:
            raise ValueError(f"CharVocab.encode: characters not in the vocabulary: {unknown}; "
                             f"use only characters of the text the vocabulary was built from")
        return np.fromiter((self.char_to_idx[c] for c in text), np.int32, len(text))

    def decode(self, indices: Any) -> str:
        """The text of ``indices`` (an NDArray, numpy array or list); padding is dropped."""
        values = indices.asnumpy() if hasattr(indices, "asnumpy") else np.asarray(indices)
        return "".join(self.idx_to_char[int(i)] for i in values.ravel() if int(i) != 0)


def bucket_keys(lengths: Sequence[int] | np.ndarray, num_buckets: int,
                spacing: str = "equal width") -> tuple[int, ...]:
    """At most ``num_buckets`` increasing keys, the last one ``max(lengths)``.

    ``"equal width"``: keys at ``ceil(max * i / num_buckets)``, ``i = 1 .. num_buckets``;
    ``"equal count"``: keys at the lengths' quantiles ``i / num_buckets``. Keys that
    coincide (short or repetitive lengths) are merged, so fewer may come back.
    """
    if spacing not in SPACINGS:
        raise ValueError(f"bucket spacing {spacing!r}: choose one of {SPACINGS}")
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, (int, np.integer)) \
            or num_buckets < 1:
        raise ValueError(f"num_buckets must be a whole number >= 1, got {num_buckets!r}")
    values = _lengths(lengths)
    longest = int(values.max())
    if spacing == "equal width":
        keys = [math.ceil(longest * i / num_buckets) for i in range(1, num_buckets + 1)]
    else:
        ordered = np.sort(values)
        keys = [int(ordered[math.ceil(len(ordered) * i / num_buckets) - 1])
                for i in range(1, num_buckets + 1)]
    return tuple(sorted(set(keys) | {longest}))


_choose_keys = bucket_keys  # (the sampler's argument of the same name hides it)


def bucket_of(length: int, keys: Sequence[int]) -> int:
    """The index of the first key ``>= length`` (the bucket a sequence goes to)."""
    index = bisect.bisect_left(keys, length)
    if index == len(keys):
        raise ValueError(f"a sequence of length {length} is longer than the largest bucket "
                         f"key {keys[-1]}: add a key >= {length}")
    return index


class FixedBucketSampler(Sampler):
    """Batches of indices, each drawn from one bucket of lengths (a batch sampler).

    ``lengths[i]`` is sample ``i``'s length. Keys are ``bucket_keys`` if given (increasing,
    the last at least the longest length), else :func:`bucket_keys` of ``num_buckets``
    and ``spacing``. Within a bucket, samples are taken in order (shuffled if ``shuffle``),
    ``batch_size`` at a time; the batches of all buckets are then interleaved (shuffled if
    ``shuffle``, else bucket by bucket). ``last_batch``: ``"keep"`` each bucket's smaller
    last batch, or ``"discard"`` it. ``batch_key(batch)`` is the key a batch pads to.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, num_buckets: int = 10,
                 bucket_keys: Sequence[int] | None = None, spacing: str = "equal width",
                 shuffle: bool = False, last_batch: str = "keep") -> None:
        self._lengths = _lengths(lengths)
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise ValueError(f"FixedBucketSampler: batch_size must be a whole number >= 1, "
                             f"got {batch_size!r}")
        if last_batch not in ("keep", "discard"):
            raise ValueError(f"last_batch must be 'keep' or 'discard', got {last_batch!r}")
        keys = _keys(bucket_keys) if bucket_keys is not None \
            else _choose_keys(self._lengths, num_buckets, spacing)
        if keys[-1] < self._lengths.max():
            raise ValueError(f"the largest bucket key {keys[-1]} is shorter than the longest "
                             f"sample ({self._lengths.max()}): add a key >= "
                             f"{self._lengths.max()}")
        self.bucket_keys = keys
        self.batch_size, self._shuffle, self._keep = int(batch_size), shuffle, last_batch == "keep"
        where = np.searchsorted(np.asarray(keys), self._lengths, side="left")
        self.buckets = [np.flatnonzero(where == b) for b in range(len(keys))]

    def _batches(self, bucket: np.ndarray) -> list[list[int]]:
        order = np.random.permutation(bucket) if self._shuffle else bucket
        size = self.batch_size
        batches = [order[i:i + size].tolist() for i in range(0, len(order), size)]
        return batches if self._keep or not batches or len(batches[-1]) == size \
            else batches[:-1]

    def __iter__(self) -> Iterator[list[int]]:
        batches = [batch for bucket in self.buckets for batch in self._batches(bucket)]
        order = np.random.permutation(len(batches)) if self._shuffle else range(len(batches))
        for index in order:
            yield batches[index]

    def __len__(self) -> int:
        rounding = math.ceil if self._keep else math.floor
        return sum(int(rounding(len(b) / self.batch_size)) for b in self.buckets)

    def batch_key(self, batch: Sequence[int]) -> int:
        """The key of the bucket ``batch`` came from: the length it is padded to."""
        return self.bucket_keys[bucket_of(int(self._lengths[list(batch)].max()),
                                          self.bucket_keys)]

    def __str__(self) -> str:
        counts = ", ".join(f"{k}: {len(b)}" for k, b in zip(self.bucket_keys, self.buckets))
        return (f"FixedBucketSampler: {len(self._lengths)} samples, {len(self)} batches of "
                f"up to {self.batch_size}; samples per bucket key {{{counts}}}")


def pad(sequences: Sequence[Any], length: int | None = None, value: int = 0,
        dtype: str = "int32") -> tuple[Any, Any]:
    """``(data, valid_length)``: the sequences as rows of one ``(batch, length)`` NDArray,
    padded with ``value`` past each one's end (``length``: the longest by default, or a
    bucket's key), and their lengths (float32, as MXNet's masks read them)."""
    from hybridlab import ndarray

    rows = [np.asarray(s.asnumpy() if hasattr(s, "asnumpy") else s).ravel() for s in sequences]
    if not rows:
        raise ValueError("pad: no sequences to pad")
    longest = max(len(r) for r in rows)
    width = longest if length is None else int(length)
    if width < longest:
        raise ValueError(f"pad: a sequence of length {longest} does not fit in length {width}; "
                         f"pad to its bucket's key (FixedBucketSampler.batch_key)")
    data = np.full((len(rows), width), value, dtype=dtype)
    for row, sequence in zip(data, rows):
        row[:len(sequence)] = sequence
    valid = np.array([len(r) for r in rows], dtype=np.float32)
    return ndarray.array(data, dtype=dtype), ndarray.array(valid)


def _lengths(lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    values = np.asarray(lengths)
    if values.ndim != 1 or values.size == 0 or not np.issubdtype(values.dtype, np.integer) \
            or values.min() < 1:
        raise ValueError("lengths must be a non-empty list of whole numbers >= 1 (one per "
                         "sample)")
    return values


def _keys(keys: Sequence[int]) -> tuple[int, ...]:
    values = tuple(int(k) for k in keys)
    if not values or any(b <= a for a, b in zip(values, values[1:])) or values[0] < 1:
        raise ValueError(f"bucket_keys must be increasing whole numbers >= 1, got {list(keys)}")
    return values
