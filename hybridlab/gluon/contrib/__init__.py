"""MXNet's ``gluon.contrib``: the container layers and SyncBatchNorm (``contrib.nn``)."""

from hybridlab.gluon.contrib import data, nn
