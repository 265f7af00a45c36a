"""The operator registry and the operators (importing this package registers them all).

``hybridlab.ops.eager`` (the engine-free namespace used by tests) is not imported here:
importing it after this package guarantees every operator is registered when it is built.
"""

from hybridlab.ops import (
    broadcast,
    control_flow,
    conv,
    conv_algorithms,
    creation,
    ctc,
    custom,
    deformable,
    elementwise,
    fused,
    indexing,
    join,
    linalg,
    nn,
    optimizer,
    pool,
    products,
    random,
    reduce,
    rnn,
    shape,
    sorting,
    special,
    tiling,
)
from hybridlab.ops.registry import (
    COMPOSITES,
    OPS,
    Attr,
    Aval,
    Kind,
    OpDef,
    RunContext,
    composite,
    get,
    populate,
    register,
)
