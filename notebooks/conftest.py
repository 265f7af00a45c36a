"""nbval settings for the course notebooks.

Rendered graphs and plots (SVG, PNG, and HTML panels that embed SVG) differ between
graphviz/matplotlib versions, so nbval does not compare them; every such output also
carries a stable ``text/plain`` summary (``Graph(nodes=7, ops=[...])``), which *is*
compared.

A cell that needs a framework hybridlab does not install (lesson 11's PyTorch cells)
starts with ``%%requires <module>`` (``hybridlab.exercises.requires``). Where that module
cannot be imported, its items are skipped, saying why (in a kernel, the cell skips itself
and shows its saved outputs; compared here, that would not be the cell's own run);
``make test-frameworks`` runs them.
"""

import os
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
# The kernel nbval starts inherits this environment: let it import this checkout's
# hybridlab even when the package is not pip-installed.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [ROOT, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])

# The generated sources the lessons print must not depend on a timing: the weights' layout
# is kept as stored unless a cell asks for the measurement (hybridize(autotune=True)).
# tools/sync_notebooks.py builds the stored outputs the same way.
os.environ["HYBRIDLAB_AUTOTUNE"] = "0"

IMAGE_TYPES = ("image/svg+xml", "image/png", "text/html")


def missing_modules(cell) -> list[str]:
    """The modules a cell's first line ``%%requires <module> ...`` names that cannot be
    imported here."""
    from hybridlab.exercises.requires import missing_modules as missing

    return missing(cell.get("source", "")) if cell is not None else []


def pytest_collection_modifyitems(items):
    import pytest

    for item in items:
        missing = missing_modules(getattr(item, "cell", None))
        if missing:
            item.add_marker(pytest.mark.skip(
                reason=f"this cell needs {', '.join(missing)} (not installed; the lesson's "
                       f"first cell says how to install it, then `make test-frameworks`)"))
        parent = item.parent
        skip = getattr(parent, "skip_compare", None)
        if skip is not None and not set(IMAGE_TYPES) <= set(skip):
            parent.skip_compare = tuple(skip) + IMAGE_TYPES
