"""The graph compiler: IR (``ir``), passes (``passes``), Python codegen, ``CachedOp``.

Data flows ``Symbol -> ir.Graph -> passes.run_pipeline -> codegen.compile_graph ->
CachedOp``. Submodules are imported lazily by their users; importing this package
imports only the IR and its shape inference (which a node built with ``ir.call`` asks).
"""

from hybridlab.graph import ir, shapes
