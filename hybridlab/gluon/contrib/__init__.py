"""MXNet's ``gluon.contrib``: the container layers, SyncBatchNorm and PixelShuffle
(``contrib.nn``), convolutional and projected recurrent cells (``contrib.rnn``), the interval
sampler (``contrib.data``)."""

from hybridlab.gluon.contrib import cnn, data, nn, rnn
