"""Gluon's layers (``from hybridlab.gluon import nn``), laid out as MXNet's ``gluon/nn/``.

What this package teaches
-------------------------
Every layer is a :class:`HybridBlock` whose maths is one ``hybrid_forward`` written with
``F.*`` operators, so it runs imperatively (``F = nd``) and traced (``F = sym``) from the
same lines. A layer that does not know its input size (``nn.Dense(256)``) creates its
weight with a 0 in the shape and fills it in from the first input in ``infer_shape``.

Layers name their operator ``fwd`` (MXNet's convention), so the output of the third
Dense layer made in a session is the Symbol ``dense2_fwd``.

* ``basic_layers.py``: containers, ``Dense``, ``Dropout``, ``Flatten``, ``BatchNorm``,
  ``Lambda`` / ``HybridLambda``;
* ``activations.py``: ``Activation``, ``LeakyReLU``;
* ``conv_layers.py``: ``Conv2D`` and the 2-D pooling layers.
"""

from hybridlab.gluon.block import Block, HybridBlock
from hybridlab.gluon.nn.activations import ELU, GELU, SELU, Activation, LeakyReLU, PReLU, Swish
from hybridlab.gluon.nn.basic_layers import (
    BatchNorm,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    GroupNorm,
    HybridLambda,
    HybridSequential,
    InstanceNorm,
    Lambda,
    LayerNorm,
    Sequential,
)
from hybridlab.gluon.nn.conv_layers import (  # type: ignore[attr-defined]  # (the pools: made)
    AvgPool1D,
    AvgPool2D,
    AvgPool3D,
    Conv1D,
    Conv2D,
    Conv2DTranspose,
    Conv3D,
    GlobalAvgPool1D,
    GlobalAvgPool2D,
    GlobalAvgPool3D,
    GlobalMaxPool1D,
    GlobalMaxPool2D,
    GlobalMaxPool3D,
    MaxPool1D,
    MaxPool2D,
    MaxPool3D,
    ReflectionPad2D,
)
from hybridlab.gluon.symbol_block import SymbolBlock  # (MXNet's gluon.nn has it too)
