"""MXNet's ``mx.runtime``: which optional features the library was built with.

MXNet reports its compile-time switches (CUDA, MKLDNN, INT64_TENSOR_SIZE, ...) so code can
branch on them. hybridlab is pure Python on numpy and has none of those builds: every
feature MXNet names is reported as disabled, so such code takes its portable branch.
"""

from __future__ import annotations

# MXNet 1.9.1's feature names (``mx.runtime.feature_list()``)
FEATURE_NAMES = (
    "CUDA", "CUDNN", "NCCL", "CUDA_RTC", "TENSORRT", "CPU_SSE", "CPU_SSE2", "CPU_SSE3",
    "CPU_SSE4_1", "CPU_SSE4_2", "CPU_SSE4A", "CPU_AVX", "CPU_AVX2", "OPENMP", "SSE", "F16C",
    "JEMALLOC", "BLAS_OPEN", "BLAS_ATLAS", "BLAS_MKL", "BLAS_APPLE", "LAPACK", "MKLDNN",
    "OPENCV", "CAFFE", "PROFILER", "DIST_KVSTORE", "CXX14", "INT64_TENSOR_SIZE",
    "SIGNAL_HANDLER", "DEBUG", "TVM_OP")


class Feature:
    """One build feature: ``name`` and whether it is ``enabled``."""

    def __init__(self, name: str, enabled: bool) -> None:
        self.name, self.enabled = name, enabled

    def __repr__(self) -> str:
        return f"{'✔' if self.enabled else '✖'} {self.name}"


class Features(dict):
    """``Features().is_enabled('CUDA')`` as in MXNet; a dict of :class:`Feature` by name."""

    def __init__(self) -> None:
        super().__init__((name, Feature(name, False)) for name in FEATURE_NAMES)

    def is_enabled(self, feature_name: str) -> bool:
        name = feature_name.upper()
        if name not in self:
            raise RuntimeError(f"feature {feature_name!r} is unknown; known features are "
                               f"{', '.join(FEATURE_NAMES)}")
        return bool(self[name].enabled)


def feature_list() -> list[Feature]:
    """Every feature, in MXNet's order."""
    return list(Features().values())
