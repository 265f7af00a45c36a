"""Networks several test modules build: the seeds' LeNet (without its print) and the
residual block of ``tools/mxnet_fixtures.py`` written in hybridlab (same child names, so
parameters saved by MXNet load into it)."""

from __future__ import annotations

from hybridlab import gluon
from hybridlab.gluon import nn


class SeedLeNet(gluon.HybridBlock):
    """The seeds' LeNet (tests/gluon/test_seeds.py) without its print."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv1 = nn.Conv2D(6, kernel_size=5)
            self.pool1 = nn.MaxPool2D(pool_size=2)
            self.conv2 = nn.Conv2D(16, kernel_size=5)
            self.pool2 = nn.MaxPool2D(pool_size=2)
            self.fc1 = nn.Dense(120)
            self.fc2 = nn.Dense(84)
            self.fc3_weight = self.params.get("fc3_weight", shape=(10, 84))

    def hybrid_forward(self, F, x, fc3_weight):
        x = self.pool1(F.relu(self.conv1(x)))
        x = self.pool2(F.relu(self.conv2(x)))
        x = x.reshape((0, -1))
        x = F.relu(self.fc2(F.relu(self.fc1(x))))
        return F.dot(x, fc3_weight, transpose_b=True)


class Residual(gluon.HybridBlock):
    def __init__(self, channels, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv = nn.Conv2D(channels, 3, padding=1, use_bias=False)
            self.bn = nn.BatchNorm()

    def hybrid_forward(self, F, x):
        return F.elemwise_add(x, self.bn(self.conv(x)))
