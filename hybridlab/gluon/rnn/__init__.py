"""MXNet's ``gluon.rnn``: recurrent cells (one time step) and layers (a whole sequence).

``rnn_cell.py`` holds the cells -- ``RNNCell``, ``LSTMCell``, ``GRUCell`` and the cells
that combine them (``SequentialRNNCell``, ``BidirectionalCell``, ``ResidualCell``,
``ZoneoutCell``, ``DropoutCell``) -- and ``unroll``, which runs a cell over a sequence
(one set of operators per step). ``rnn_layer.py`` holds the layers ``RNN``, ``LSTM`` and
``GRU``: the same computations as stacked cells, run by MXNet's fused ``RNN`` operator
(hybridlab/ops/rnn.py).
"""

from hybridlab.gluon.rnn.rnn_cell import (
    BidirectionalCell,
    DropoutCell,
    GRUCell,
    HybridRecurrentCell,
    HybridSequentialRNNCell,
    LSTMCell,
    ModifierCell,
    RecurrentCell,
    ResidualCell,
    RNNCell,
    SequentialRNNCell,
    ZoneoutCell,
)
from hybridlab.gluon.rnn.rnn_layer import GRU, LSTM, RNN
