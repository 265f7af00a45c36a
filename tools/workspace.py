"""The student workspace: a working copy of the course that `make lab` opens.

What this tool keeps true
-------------------------
The tracked notebooks in ``notebooks/`` are what nbval compares, so a student must never
edit them: autosave, a ``git pull`` and the tests would collide. ``make lab`` therefore
opens ``workspace/`` (git-ignored), made on first use:

* a copy of every lesson notebook, trusted (``jupyter trust``), carrying this machine's
  kernelspec and ``language_info`` so that opening and running it marks nothing changed;
* ``solutions``, a link to ``lessons/solutions`` (where every lesson's exercises point);
* nothing else: test files (nbval's ``conftest.py``) stay out of the student's way.

It also sets up the environment's JupyterLab (:func:`install_lab_settings`) so a saved
notebook keeps its widgets:

* ``share/jupyter/lab/settings/overrides.d/hybridlab.json`` (the environment's
  overrides, one file per package beside the user's ``overrides.json``) turns on the
  widget manager's
  ``saveState``: every save (autosave too) writes the widgets' state into the notebook,
  so its outputs never point at models the file does not hold;
* ``etc/jupyter/jupyter_server_config.json`` (its other settings kept; the server reads
  no ``ContentsManager`` setting from a ``.d`` folder) installs
  ``hybridlab.viz.bundle.pre_save_hook``: an output whose widget model is still missing
  (a widget closed before the save, a lab that does not save state) loses only its widget
  view, so JupyterLab shows its PNG instead of "Error displaying widget: model not found".

``refresh`` brings in notebooks the course changed since. A notebook the student edited is
never overwritten: their copy moves to ``workspace/kept/<time>/`` first, and the command
says where.

    python3 tools/workspace.py            # make it if missing; print its path
    python3 tools/workspace.py --refresh  # bring in new course versions, keeping edits
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
WORKSPACE = ROOT / "workspace"
STAMPS = ".course-versions.json"  # which course version each copy started from


def local_metadata() -> dict:
    """The kernelspec and language_info a kernel of this interpreter reports."""
    version = ".".join(map(str, sys.version_info[:3]))
    return {
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                       "language": "python"},
        "language_info": {"name": "python", "version": version,
                          "codemirror_mode": {"name": "ipython", "version": 3},
                          "file_extension": ".py", "mimetype": "text/x-python",
                          "nbconvert_exporter": "python", "pygments_lexer": "ipython3"},
    }


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def install_copy(source: Path, target: Path) -> None:
    """Copy one course notebook with local metadata, atomically, then trust it."""
    notebook = json.loads(source.read_text(encoding="utf-8"))
    notebook["metadata"].update(local_metadata())
    partial = target.with_suffix(".ipynb.partial")
    partial.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n",
                       encoding="utf-8")
    os.replace(partial, target)
    trust = [sys.executable, "-m", "jupyter", "trust", str(target)]
    if subprocess.run(trust, capture_output=True).returncode != 0:
        print(f"workspace: could not trust {target.name} (graphs show as images until you "
              f"run it)", file=sys.stderr)


def make(refresh: bool = False) -> list[str]:
    """Create (or refresh) the workspace; return what was done, one line each."""
    WORKSPACE.mkdir(exist_ok=True)
    solutions = WORKSPACE / "solutions"
    if not solutions.exists():
        solutions.symlink_to(Path("..") / "lessons" / "solutions")
    stamps_path = WORKSPACE / STAMPS
    stamps = json.loads(stamps_path.read_text()) if stamps_path.exists() else {}
    done, kept = [], WORKSPACE / "kept" / time.strftime("%Y%m%d-%H%M%S")
    for source in sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")):
        target, course = WORKSPACE / source.name, digest(source)
        if target.exists():
            if not refresh or stamps.get(source.name, {}).get("course") == course:
                continue  # up to date, or not asked to refresh
            if digest(target) != stamps.get(source.name, {}).get("copy"):  # student edits
                kept.mkdir(parents=True, exist_ok=True)
                shutil.move(str(target), kept / source.name)
                done.append(f"kept your edited {source.name} in {kept.relative_to(ROOT)}")
        install_copy(source, target)
        stamps[source.name] = {"course": course, "copy": digest(target)}
        done.append(f"{'updated' if refresh else 'added'} {source.name}")
    partial = stamps_path.with_suffix(".partial")
    partial.write_text(json.dumps(stamps, indent=1) + "\n")
    os.replace(partial, stamps_path)
    return done


WIDGETS_PLUGIN = "@jupyter-widgets/jupyterlab-manager:plugin"


def install_lab_settings(prefix: Path = Path(sys.prefix)) -> list[Path]:
    """Write the widget settings and the save hook into the environment at ``prefix``;
    return the files written (JupyterLab's settings override, the server's config)."""
    overrides = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.d"
    config = prefix / "etc" / "jupyter" / "jupyter_server_config.json"
    settings = {WIDGETS_PLUGIN: {"saveState": True}}
    hook = json.loads(config.read_text()) if config.exists() else {}
    hook.setdefault("ContentsManager", {})["pre_save_hook"] = "hybridlab.viz.bundle.pre_save_hook"
    for path, data in ((overrides / "hybridlab.json", settings), (config, hook)):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(data, indent=1) + "\n")
        os.replace(partial, path)
    return [overrides / "hybridlab.json", config]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh", action="store_true",
                        help="bring in notebooks the course changed, keeping your edits aside")
    args = parser.parse_args(argv)
    for line in make(args.refresh):
        print(f"workspace: {line}")
    install_lab_settings()
    print(WORKSPACE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
