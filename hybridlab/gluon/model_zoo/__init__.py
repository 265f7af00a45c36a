"""MXNet's ``gluon.model_zoo``: network definitions (``vision``), without pretrained weights."""

from hybridlab.gluon.model_zoo import vision
