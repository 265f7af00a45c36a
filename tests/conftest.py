"""Shared pytest set-up for the whole suite (fixtures for one area belong in its subfolder).

Hypothesis profiles: property tests pick their own ``max_examples``; these profiles only
turn off the per-example deadline, because timings on a loaded 2-core CI machine are
noise, not bugs. ``CI=true`` also prints the reproduction blob of a failing example.
"""

import os

from hypothesis import settings

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
