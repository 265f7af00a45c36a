"""Layer rules import-linter cannot express (the layers themselves: .importlinter).

* viz uses only *public* names of the layers below it: no ``from hybridlab.x import _y``
  and no import of a private module, so a layer may rename its privates freely.
* No module except the top layer (exercises) imports the package root: ``from hybridlab
  import nd`` imports ``hybridlab/__init__``, which imports every layer (viz too), so it
  hides an upward import from the layer contract. Import the module itself
  (``from hybridlab import ndarray as nd``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "hybridlab"


def _private_names_used(path: Path) -> list[str]:
    """``module:name`` for every private name of another hybridlab package that ``path`` uses."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hybridlab"):
            if node.module.startswith("hybridlab.viz"):
                continue
            parts = node.module.split(".")
            found += [f"{node.module} (a private module), line {node.lineno}"
                      for p in parts if p.startswith("_")]
            found += [f"{node.module}.{a.name}, line {node.lineno}" for a in node.names
                      if a.name.startswith("_") and a.name != "__version__"]
        elif isinstance(node, ast.Import):
            found += [f"{a.name}, line {node.lineno}" for a in node.names
                      if a.name.startswith("hybridlab.")
                      and any(p.startswith("_") for p in a.name.split("."))]
    return found


VIZ_MODULES = sorted((PACKAGE / "viz").glob("*.py"))


@pytest.mark.parametrize("path", VIZ_MODULES, ids=lambda p: p.name)
def test_viz_imports_only_public_names_of_the_layers_below(path):
    private = _private_names_used(path)
    assert not private, (f"viz/{path.name} uses private names of the core: {private}; "
                         f"make them public in their module (and document them) instead")


def test_the_private_name_check_finds_a_private_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from hybridlab.graph.ir import _format\nimport hybridlab.gluon._trace\n"
                      "from hybridlab.viz.bundle import _ok\n")
    assert len(_private_names_used(sample)) == 2


def test_no_module_below_the_top_layer_imports_the_package_root():
    graph = grimp.build_graph("hybridlab")
    offenders = sorted(
        f"{m} line {d['line_number']}: {d['line_contents']}"
        for m in graph.modules if m != "hybridlab" and not m.startswith("hybridlab.exercises")
        for d in graph.get_import_details(importer=m, imported="hybridlab"))
    assert not offenders, f"import the module, not the package root: {offenders}"
