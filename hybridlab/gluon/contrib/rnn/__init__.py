"""MXNet's ``gluon.contrib.rnn``: convolutional recurrent cells (``conv_rnn_cell.py``),
LSTM with a projection, variational dropout and ``dynamic_unroll`` (``rnn_cell.py``)."""

from hybridlab.gluon.contrib.rnn import conv_rnn_cell, rnn_cell
from hybridlab.gluon.contrib.rnn.conv_rnn_cell import (
    Conv1DGRUCell,
    Conv1DLSTMCell,
    Conv1DRNNCell,
    Conv2DGRUCell,
    Conv2DLSTMCell,
    Conv2DRNNCell,
    Conv3DGRUCell,
    Conv3DLSTMCell,
    Conv3DRNNCell,
)
from hybridlab.gluon.contrib.rnn.rnn_cell import LSTMPCell, VariationalDropoutCell, dynamic_unroll
