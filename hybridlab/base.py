"""MXNet's ``mx.base``: the error the engine raises at sync points."""

from hybridlab.errors import MXNetError, NotImplementedForSymbol

__all__ = ["MXNetError", "NotImplementedForSymbol", "__version__"]

# The package version (``mx.__version__``), here so that modules inside the package (the
# JSON writer of symbol.py) can read it without importing the package root.
__version__ = "0.2.0"
