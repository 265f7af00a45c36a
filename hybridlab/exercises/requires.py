"""``%%requires torch``: a lesson cell that needs a framework the course does not install.

What this module keeps true
---------------------------
Some lessons run code in another framework (PyTorch in lesson 11), which the course does
not install by default. Such a cell starts with one line naming what it needs::

    %%requires torch
    import torch
    print(torch.ones(2))

* Where every module named can be imported, the rest of the cell runs as any cell does:
  its prints, displays and last expression show, and an error fails the cell.
* Where one is missing, the cell does not fail -- so Run All goes on to the next cell --
  and its output says it was skipped and why, followed by the outputs the course saved
  when it ran the cell with the framework. A student without it still reads them, and
  the notebook (autosave included) keeps them.

The saved outputs come from the course's own notebooks (``notebooks/*.ipynb`` of the
checkout hybridlab runs from): the cell with the same source. A cell the student changed
has none, and the output says so. Widget views are left out of what is shown again (their
models belong to the run that made them); every widget output also carries a PNG and a
text, which are shown.

The magic is registered when :mod:`hybridlab.exercises` is imported in IPython, as every
lesson's first cell does (or explicitly: ``%load_ext hybridlab.exercises.requires``).
``notebooks/conftest.py`` (nbval) and ``tools/sync_notebooks.py`` read the same first line
with :func:`required_modules`: nbval skips such a cell where a module is missing, and the
notebook is never rebuilt without it (it would lose the saved outputs).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

MAGIC = "%%requires"
COURSE_NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SKIP_MIME = "application/vnd.hybridlab.skipped+json"  # marks the notice among the outputs
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def required_modules(source: str) -> list[str]:
    """The modules a cell's first line ``%%requires a b`` names ([] for any other cell)."""
    words = source.lstrip().split("\n", 1)[0].split()
    return words[1:] if words[:1] == [MAGIC] else []


def missing_modules(source: str) -> list[str]:
    """The modules a cell requires that cannot be imported here."""
    return [name for name in required_modules(source) if importlib.util.find_spec(name) is None]


def normalised(source: str) -> str:
    """A cell's source with outer blank lines and line-end spaces dropped: the key that
    finds a cell's saved outputs."""
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


@lru_cache(maxsize=32)
def _cells_of(path: Path, mtime_ns: int) -> dict[str, list[dict[str, Any]]]:
    text = path.read_text(encoding="utf-8")
    if MAGIC not in text:
        return {}
    cells = json.loads(text).get("cells", [])
    sources = {id(cell): "".join(cell.get("source", "")) for cell in cells}
    return {normalised(sources[id(cell)]): cell.get("outputs", []) for cell in cells
            if cell.get("cell_type") == "code" and required_modules(sources[id(cell)])}


def saved_outputs(source: str, folder: Path | None = None) -> list[dict[str, Any]] | None:
    """The outputs the course saved for the cell with this source, or None if no notebook
    in ``folder`` (the course's ``notebooks/``) holds that cell."""
    key = normalised(source)
    for path in sorted((folder or COURSE_NOTEBOOKS).glob("*.ipynb")):
        cells = _cells_of(path, path.stat().st_mtime_ns)
        if key in cells:
            return cells[key]
    return None


def notice(missing: list[str], found: bool) -> dict[str, Any]:
    """The first output of a skipped cell: what was skipped, why, and how to run it."""
    names = " and ".join(missing)
    text = (f"skipped: this cell needs {names}, which is not installed here. "
            + ("Below: its outputs as the course saved them, from a run with it. "
               if found else "The course saved no outputs for this cell as it is now. ")
            + f"To run it, install {names} (the lesson's introduction says how) and run "
              "the cell again.")
    return {"text/plain": text, SKIP_MIME: {"missing": missing, "saved_outputs": found},
            "text/markdown": f"*{text}*"}


def show_saved(outputs: list[dict[str, Any]]) -> None:
    """Show saved outputs again, in order: streams printed, rich outputs displayed."""
    from IPython.display import publish_display_data

    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            stream = sys.stderr if output.get("name") == "stderr" else sys.stdout
            stream.write("".join(output.get("text", "")))
            stream.flush()
        elif kind in ("display_data", "execute_result"):
            data = {mime: "".join(value) if isinstance(value, list) else value
                    for mime, value in output.get("data", {}).items() if mime != WIDGET_VIEW}
            publish_display_data(data, output.get("metadata", {}))


def run_body(shell: Any, body: str) -> Any:
    """Run a cell's body as IPython runs a cell: in the user's namespace, errors raised
    (so the cell fails), and the value of a last expression returned for display."""
    __tracebackhide__ = True  # IPython leaves this frame out of tracebacks
    code = shell.transform_cell(body)
    filename = shell.compile.cache(code, shell.execution_count, raw_code=body)
    tree = ast.parse(code, filename)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, filename, "exec"), shell.user_ns)
    if last is not None:
        expression = ast.Expression(last.value)
        return eval(compile(expression, filename, "eval"), shell.user_ns)
    return None


def requires(line: str, cell: str) -> Any:
    """The cell magic ``%%requires module ...`` (see the module docstring)."""
    from IPython import get_ipython
    from IPython.display import display

    missing = missing_modules(f"{MAGIC} {line}")
    if not missing:
        return run_body(get_ipython(), cell)
    outputs = saved_outputs(f"{MAGIC} {line}\n{cell}")
    display(notice(missing, outputs is not None), raw=True)
    show_saved(outputs or [])
    return None


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext hybridlab.exercises.requires``: register the ``%%requires`` magic."""
    shell.register_magic_function(requires, "cell", "requires")


def register() -> None:
    """Register ``%%requires`` in the running IPython, if there is one."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        load_ipython_extension(shell)
