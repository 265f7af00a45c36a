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
