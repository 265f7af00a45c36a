"""Gluon: parameters, blocks, layers, losses, the Trainer and data loading.

``from hybridlab import gluon`` and ``from hybridlab.gluon import nn`` give MXNet 1.x
Gluon's names. Read ``block.py`` for ``hybridize()``, ``_trace.py`` for what a trace
runs only once, and ``parameter.py`` for deferred initialisation.
"""

from hybridlab import contrib as _control_flow  # installs F.contrib.cond/foreach/while_loop
from hybridlab.gluon import contrib, data, loss, model_zoo, nn, rnn, utils
from hybridlab.gluon.block import Block, HybridBlock
from hybridlab.gluon.parameter import Parameter, ParameterDict
from hybridlab.gluon.symbol_block import SymbolBlock
from hybridlab.gluon.trainer import Trainer
