"""How core objects show themselves in Jupyter, without the core importing viz.

What this module teaches
------------------------
A Symbol, a Graph and a HybridBlock draw themselves as graphs in a notebook, but the
drawing code (``hybridlab.viz``) sits *above* them: the core must not import it. So the
dependency is inverted. The core asks this small module for a display bundle; viz, when
imported, installs the function that draws (:func:`set_renderer`). ``import hybridlab``
imports viz (a light import: graphviz and matplotlib load on first drawing), so in a
notebook the hook is always filled. Without it, objects show their plain text.
"""

from __future__ import annotations

from typing import Any, Callable

Renderer = Callable[..., dict[str, str]]

_renderer: Renderer | None = None


def set_renderer(renderer: Renderer | None) -> None:
    """Install ``renderer(obj, text=None) -> bundle`` (viz does this when imported)."""
    global _renderer
    _renderer = renderer


def mimebundle(obj: Any, text: str | None = None) -> dict[str, str]:
    """The ``_repr_mimebundle_`` of a core object: the renderer's drawing, or plain text."""
    if _renderer is None:
        return {"text/plain": text if text is not None else repr(obj)}
    return _renderer(obj, text=text)
