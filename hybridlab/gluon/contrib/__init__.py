"""MXNet's ``gluon.contrib``: the container layers and SyncBatchNorm (``contrib.nn``); a text
that ships with Python and bucketing by length (``contrib.data``)."""

from hybridlab.gluon.contrib import data, nn
