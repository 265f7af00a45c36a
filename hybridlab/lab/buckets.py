"""Bucketing, modelled: padding wasted against programs compiled, over a text's lines.

What this module teaches
------------------------
A hybridized recurrent network compiles one program per input shape. Fed sequences of
every length one by one, it would compile a program per length; padded all to the
longest, it would compile once and spend most of its arithmetic on padding. *Bucketing*
sits between: ``k`` bucket keys (``gluon.contrib.data.bucket_keys``), every sequence
padded to the first key at least its length, one compiled program per bucket that holds
sequences. For a list of sequence lengths (the lines of a text) and a choice of keys,
:class:`BucketModel` gives every number the bucket explorer shows:

* **programs compiled**: the buckets that hold at least one sequence;
* **padding wasted**: the share of the tokens computed that are padding,
  ``1 - sum(length) / sum(key of its bucket)``;
* **compile time**: each program's cost at its key, ``compile.at(key)``;
* **time per epoch**: each bucket's batches (``ceil(count / batch_size)``) at the cost
  of one training step at its key, ``step.at(key)``; the first epoch adds the compiles.

The costs are straight lines in the padded length ``T`` (:class:`LineCost`), fitted to
times the lesson measures on the real network, one pair per way of hybridizing
(:data:`WAYS`): *unrolled*, where a program holds ``T`` copies of the step, so tracing
and compiling it grow with ``T``; and *foreach*, where the step's body is one subgraph
whatever ``T`` is, so a new length costs only shape inference and a memory plan. A
smaller last batch of a bucket is modelled at a full batch's cost and shape (padded with
empty rows, or dropped: ``last_batch='discard'``).

The trade-off: more buckets waste less padding and compile more programs; the best
number is where the two costs balance, and it moves with the cost of a compile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from hybridlab.gluon.contrib.data import SPACINGS, bucket_keys

WAYS = ("unrolled", "foreach")
MAX_BUCKETS = 32  # the explorer's slider and curve go from 1 to this


@dataclass(frozen=True)
class LineCost:
    """Seconds as a straight line in the padded length: ``base + per_step * T``."""

    base: float
    per_step: float

    def at(self, length: int) -> float:
        return max(0.0, self.base + self.per_step * length)

    @classmethod
    def fit(cls, lengths: Sequence[int], seconds: Sequence[float]) -> LineCost:
        """The least-squares line through measured ``(length, seconds)`` points (a
        constant when every length is the same)."""
        if len(lengths) != len(seconds) or not lengths:
            raise ValueError(f"LineCost.fit: {len(lengths)} lengths and {len(seconds)} times; "
                             "give one time per length (at least one)")
        x, y = np.asarray(lengths, dtype=float), np.asarray(seconds, dtype=float)
        if np.ptp(x) == 0:
            return cls(float(y.mean()), 0.0)
        slope, intercept = np.polyfit(x, y, 1)
        return cls(float(intercept), float(slope))

    def __str__(self) -> str:
        return f"{self.base * 1e3:.3g} ms + {self.per_step * 1e3:.3g} ms x T"


@dataclass(frozen=True)
class Costs:
    """One way's costs: a new program at length T, and one training step at length T."""

    compile: LineCost
    step: LineCost


@dataclass
class BucketModel:
    """The bucket explorer's state: the sequence lengths, each way's costs, and the
    choice of keys (``keys`` if given, else ``buckets`` keys of ``spacing``)."""

    lengths: Sequence[int]
    costs: dict[str, Costs]
    buckets: int = 4
    spacing: str = "equal width"
    way: str = "unrolled"
    batch_size: int = 32
    keys: tuple[int, ...] | None = None
    _sorted: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._sorted = np.sort(np.asarray(self.lengths, dtype=np.int64))
        if self._sorted.size == 0 or self._sorted[0] < 1:
            raise ValueError("BucketModel needs at least one sequence length, all >= 1")
        if set(self.costs) != set(WAYS):
            raise ValueError(f"BucketModel: give costs for each way {WAYS}, got {list(self.costs)}")
        self.check()

    def check(self) -> None:
        """Raise a clear error if a setting is out of range (the widget calls it too)."""
        if self.way not in WAYS:
            raise ValueError(f"way {self.way!r}: choose one of {WAYS}")
        if self.spacing not in SPACINGS:
            raise ValueError(f"spacing {self.spacing!r}: choose one of {SPACINGS}")
        if not 1 <= self.batch_size:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.keys is not None and (list(self.keys) != sorted(set(self.keys))
                                      or self.keys[-1] < self._sorted[-1]):
            raise ValueError(f"keys {list(self.keys)} must increase and end at a length >= "
                             f"the longest sequence ({self._sorted[-1]})")

    @property
    def longest(self) -> int:
        return int(self._sorted[-1])

    def bucket_keys(self, buckets: int | None = None) -> tuple[int, ...]:
        """The keys in use (for ``buckets`` keys of the current spacing, if given)."""
        if self.keys is not None and buckets is None:
            return tuple(self.keys)
        return bucket_keys(self._sorted, buckets or self.buckets, self.spacing)

    def counts(self, keys: Sequence[int] | None = None) -> list[int]:
        """How many sequences each key's bucket holds."""
        keys = self.bucket_keys() if keys is None else keys
        edges = np.searchsorted(self._sorted, np.asarray(keys), side="right")
        return [int(n) for n in np.diff(np.concatenate([[0], edges]))]

    def numbers(self, keys: Sequence[int] | None = None) -> dict[str, float]:
        """Everything the explorer shows, for ``keys`` (default: the keys in use)."""
        keys = self.bucket_keys() if keys is None else tuple(keys)
        counts = self.counts(keys)
        computed = sum(k * n for k, n in zip(keys, counts))
        costs = self.costs[self.way]
        used = [(k, n) for k, n in zip(keys, counts) if n]
        compile_s = sum(costs.compile.at(k) for k, _ in used)
        epoch_s = sum(math.ceil(n / self.batch_size) * costs.step.at(k) for k, n in used)
        return {"programs": len(used), "padding": 1 - float(self._sorted.sum()) / computed,
                "compile_s": compile_s, "epoch_s": epoch_s, "first_epoch_s": compile_s + epoch_s,
                "batches": sum(math.ceil(n / self.batch_size) for _, n in used)}

    def curve(self, up_to: int = MAX_BUCKETS) -> list[tuple[int, dict[str, float]]]:
        """``numbers`` for 1 .. ``up_to`` buckets of the current spacing (the trade-off)."""
        return [(k, self.numbers(self.bucket_keys(k))) for k in range(1, up_to + 1)]

    def best(self, up_to: int = MAX_BUCKETS, epochs: int = 1) -> int:
        """The number of buckets (of the current spacing) with the least time for
        ``epochs`` epochs, compiles included (the fewest buckets among ties)."""
        return min(self.curve(up_to),
                   key=lambda point: point[1]["compile_s"] + epochs * point[1]["epoch_s"])[0]

    def summary(self) -> str:
        n = self.numbers()
        keys = self.bucket_keys()
        return (f"{len(self._sorted)} sequences of 1-{self.longest} tokens, batch "
                f"{self.batch_size}, {self.way}; keys {list(keys)}: {n['programs']} programs "
                f"compiled, {n['padding']:.1%} of the tokens are padding; compiles "
                f"{n['compile_s']:.3g} s, an epoch {n['epoch_s']:.3g} s "
                f"({n['batches']} batches), the first {n['first_epoch_s']:.3g} s")
