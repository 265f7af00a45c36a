"""nbval settings for the course notebooks.

Rendered graphs and plots (SVG, PNG, and HTML panels that embed SVG) differ between
graphviz/matplotlib versions, so nbval does not compare them; every such output also
carries a stable ``text/plain`` summary (``Graph(nodes=7, ops=[...])``), which *is*
compared.
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


def pytest_collection_modifyitems(items):
    for item in items:
        parent = item.parent
        skip = getattr(parent, "skip_compare", None)
        if skip is not None and not set(IMAGE_TYPES) <= set(skip):
            parent.skip_compare = tuple(skip) + IMAGE_TYPES
