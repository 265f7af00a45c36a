"""The operator registry and the operators (importing this package registers them all).

``hybridlab.ops.eager`` (the engine-free namespace used by tests) is not imported here:
importing it after this package guarantees every operator is registered when it is built.
"""

from hybridlab.ops import (  # noqa: F401  (each registers its operators)
    broadcast,
    conv,
    creation,
    elementwise,
    fused,
    indexing,
    join,
    la_op,
    linalg,
    nn,
    pool,
    random,
    reduce,
    shape,
)
from hybridlab.ops.registry import (  # noqa: F401
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
