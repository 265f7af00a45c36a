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
from hybridlab.gluon.nn.activations import Activation, LeakyReLU
from hybridlab.gluon.nn.basic_layers import (
    BatchNorm,
    Dense,
    Dropout,
    Flatten,
    HybridLambda,
    HybridSequential,
    Lambda,
    Sequential,
)
from hybridlab.gluon.nn.conv_layers import AvgPool2D, Conv2D, GlobalAvgPool2D, MaxPool2D
