"""MXNet's ``mx.base``: the error the engine raises at sync points."""

from hybridlab.errors import MXNetError

__all__ = ["MXNetError"]
