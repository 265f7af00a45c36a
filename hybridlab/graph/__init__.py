"""The graph compiler: IR (``ir``), passes (``passes``), Python codegen, ``CachedOp``.

Data flows ``Symbol -> ir.Graph -> passes.run_pipeline -> codegen.compile_graph ->
CachedOp``. Submodules are imported lazily by their users; importing this package
imports the IR, its shape inference (which a node built with ``ir.call`` asks), and
``loops``, which gives the loop operators (ops/control_flow.py) the graph layer's shape
inference, compiler and gradient of their bodies.
"""

from hybridlab.graph import ir, loops, shapes
