"""Structure the linters do not check by default: short functions, passes used by their
public names.

* The functions named in :data:`SIMPLE` stay below McCabe complexity 10 (ruff's C901):
  each was split once (drawing from layout, validation from the loop) and must not grow
  back into a chain of branches.
* Outside ``graph/``, a compiler pass is imported from ``hybridlab.graph.passes`` (the
  package's public names), never from a pass's own module: nothing reaches into a pass's
  internals (its notes and derived inputs are part of its public result).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hybridlab"
SIMPLE = {"hybridlab/viz/memory.py": "draw", "hybridlab/viz/graph.py": "to_block_dot",
          "hybridlab/lab/schedule.py": "simulate"}
TEN_BRANCHES = "def branchy(x):\n" + "".join(f"    if x == {i}:\n        return {i}\n"
                                              for i in range(9)) + "    return -1\n"


def _too_complex(paths: list[str]) -> set[tuple[str, str]]:
    """(file, function) for every function of ``paths`` of McCabe complexity 10 or more."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--select",
                           "C901", "--config", "lint.mccabe.max-complexity=9",
                           "--output-format", "json", *paths], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    return {(Path(f["filename"]).name, f["message"].split("`")[1])
            for f in json.loads(done.stdout)}


def test_the_split_functions_stay_below_complexity_10(tmp_path):
    probe = tmp_path / "probe.py"  # complexity 10: the check must see it
    probe.write_text(TEN_BRANCHES)
    flagged = _too_complex([*SIMPLE, str(probe)])
    assert ("probe.py", "branchy") in flagged
    grown = {(f, name) for f, name in flagged if f != "probe.py"}
    assert not {(Path(p).name, SIMPLE[p]) for p in SIMPLE} & grown, (
        f"{sorted(grown)}: complexity 10 or more; split it (drawing from layout, or a "
        f"table where a chain of ifs stands)")


def test_passes_are_used_by_their_public_names():
    inside = []
    for path in PACKAGE.rglob("*.py"):
        if "graph" in path.relative_to(PACKAGE).parts:
            continue
        inside += [f"{path.relative_to(ROOT)}:{node.lineno} ({node.module})"
                   for node in ast.walk(ast.parse(path.read_text(), str(path)))
                   if isinstance(node, ast.ImportFrom)
                   and (node.module or "").startswith("hybridlab.graph.passes.")]
    assert not inside, f"import these from hybridlab.graph.passes, not a pass's module: {inside}"
