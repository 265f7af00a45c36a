"""Numbers from outputs into lesson prose, and claims that fail the notebook when false.

What this module keeps true
---------------------------
A lesson never types a measured number into its text (the truth rule in CONTRIBUTING.md).
The cell that measures a figure calls ``glue("name", value)``: the figure is printed as the
cell's output, and ``tools/sync_notebooks.py`` writes the same text into the notebook's
markdown wherever the lesson source says ``{{name}}``. The lesson source keeps the
placeholder, so ``sync_notebooks --check`` still compares sources.

``claim(ok, text, label)`` is how a lesson asserts what its prose says ("the compiled call
is faster"): it prints the claim when it holds and raises :class:`ClaimError` when it does
not, so nbval and ``make notebooks`` fail instead of a sentence quietly becoming false.
"""

from __future__ import annotations

import re
from typing import Any

GLUE_MIME = "application/vnd.hybridlab.glue+json"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ClaimError(AssertionError):
    """A sentence of a lesson is no longer true on this run."""


def glue(name: str, value: Any, fmt: str = "{}") -> str:
    """Show ``value`` formatted with ``fmt`` as this cell's output under ``name``;
    return the text. ``{{name}}`` in the lesson's later prose becomes that text."""
    if not NAME.match(name):
        raise ValueError(f"glue: {name!r} is not a valid name; use letters, digits and _")
    text = fmt.format(value)
    from IPython.display import display

    display({"text/plain": text, GLUE_MIME: {"name": name, "text": text}}, raw=True)
    return text


def claim(ok: Any, text: str, label: str | None = None) -> None:
    """Assert that the lesson's sentence ``text`` holds on this run: print it if so,
    raise :class:`ClaimError` naming it if not. ``label`` ties the claim to the prose
    sentences that state it (``<!-- claim: label -->`` after each; tools/check_lessons.py
    fails on a sentence stating a direction that no claim asserts)."""
    if not ok:
        raise ClaimError(f"the lesson says: {text!r}, but this run shows otherwise")
    print(f"checked: {text}")
