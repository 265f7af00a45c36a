"""Shared pytest set-up for the whole suite (fixtures for one area belong in its subfolder).

Hypothesis profiles: property tests pick their own ``max_examples``; these profiles only
turn off the per-example deadline, because timings on a loaded 2-core CI machine are
noise, not bugs. ``CI=true`` also prints the reproduction blob of a failing example.

The weights' layout is not chosen by timing here (``HYBRIDLAB_AUTOTUNE=0``, set before
hybridlab is imported, so subprocesses inherit it): tests compare results bit for bit and
generated sources, and a measurement on a loaded machine may choose either program.
``tests/graph/test_autotune.py`` switches it on with a fake timer.
"""

import os

os.environ.setdefault("HYBRIDLAB_AUTOTUNE", "0")

from hypothesis import settings

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_terminal_summary(terminalreporter):
    """The loaders' fuzz counts (tests/test_fuzz_loaders.py), when it ran."""
    import sys

    fuzz = sys.modules.get("test_fuzz_loaders")
    if fuzz is None or not fuzz.TALLY:
        return
    terminalreporter.section("loader fuzzing")
    for key in sorted(fuzz.TALLY):
        terminalreporter.write_line(f"{key}: {fuzz.TALLY[key]}")
    terminalreporter.write_line(f"largest peak: 64 MiB + {fuzz.PEAK_RATIO['worst']:.2f} x the "
                                f"file's size (bound: 64 MiB + 4 x)")


import pytest  # noqa: E402  (after the environment is set)


@pytest.fixture(scope="session")
def dask_client():
    """One 2-process Dask cluster for the whole test session (starting one costs seconds):
    the dist_sync/dist_async tests and the all-reduce measurements share it."""
    pytest.importorskip("distributed")
    from distributed import Client

    from hybridlab import dask as hdask

    with hdask.local_cluster(2, processes=True) as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        yield client
