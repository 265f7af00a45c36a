"""MXNet's ``gluon.contrib``: the container layers (``contrib.nn``)."""

from hybridlab.gluon.contrib import nn
