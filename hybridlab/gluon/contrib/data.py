"""MXNet's ``gluon.contrib.data``: the interval sampler (it lives in ``gluon.data.sampler``)."""

from hybridlab.gluon.data.sampler import IntervalSampler

__all__ = ["IntervalSampler"]
