"""What a compiler pass may need to know besides the graph: the mode it compiles for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PassContext:
    """``training``: the program runs in training mode (BatchNorm lowers to the batch's
    statistics, Dropout drops). ``keep``: layer operators ``lower_operators`` leaves whole
    (the ONNX exporter keeps those ONNX has as one operator)."""

    training: bool = False
    keep: frozenset[str] = frozenset()


PREDICTION = PassContext()  # the default: compiled to predict, every layer operator lowered
