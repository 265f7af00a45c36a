"""Candidate sampling: ``F.contrib.rand_zipfian`` (MXNet's sampled-softmax helper).

A language model with a huge vocabulary trains on a few sampled classes per step; it
draws them from an approximately Zipfian (log-uniform) distribution, where class ``k``
has probability ``log((k + 2) / (k + 1)) / log(range_max + 1)``, and corrects its
logits by each class's *expected count*. Written with ``F`` only, so ``nd`` runs it at
once and ``sym`` builds the same three outputs as a graph.
"""

from __future__ import annotations

import math
from typing import Any


def rand_zipfian(F: Any, true_classes: Any, num_sampled: int, range_max: int,
                 ctx: Any = None) -> tuple[Any, Any, Any]:
    """``(sampled_classes, expected_count_true, expected_count_sampled)``: ``num_sampled``
    classes in ``[0, range_max)`` drawn with replacement, and the expected count of each
    true and each sampled class in such a draw."""
    if not (isinstance(num_sampled, int) and isinstance(range_max, int)
            and num_sampled > 0 and range_max > 0):
        raise ValueError(f"rand_zipfian: num_sampled and range_max are counts > 0, got "
                         f"num_sampled={num_sampled!r}, range_max={range_max!r}")
    log_range = math.log1p(range_max)
    # exp(u) - 1 for u uniform on [0, log(range_max + 1)) falls in [k, k + 1) with the
    # probability above; the modulo keeps a rounding at the top end in range
    drawn = F.random.uniform(0, log_range, shape=(num_sampled,), dtype="float64", ctx=ctx)
    sampled = F.cast(F.floor(F.expm1(drawn)), dtype="int64") % range_max

    def expected_count(classes: Any) -> Any:
        as_float = F.cast(classes, dtype="float64")
        return F.log((as_float + 2.0) / (as_float + 1.0)) * (num_sampled / log_range)

    return sampled, expected_count(true_classes), expected_count(sampled)
