"""MXNet's ``gluon.contrib``: the container layers, SyncBatchNorm and PixelShuffle
(``contrib.nn``), convolutional and projected recurrent cells (``contrib.rnn``), the interval
sampler, a text that ships with Python and bucketing by length (``contrib.data``)."""

from hybridlab.gluon.contrib import cnn, data, nn, rnn
