"""Guards on the project set-up: dependency lists, a light `import hybridlab`, line budgets.

* pyproject.toml and environment.yml must list the same packages with the same version
  bounds, so a pip user and a conda user get the same course.
* ``import hybridlab`` must stay light: it imports numpy and nothing heavy (plots, widgets
  and graphviz are imported inside the functions that draw). How long it takes is measured
  by ``benchmarks/import_time.py``.
* ``tools/sz.py`` (the code-line budgets, CONTRIBUTING.md) passes, and counts what it claims to.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# conda-forge names that differ from the PyPI name of the same package.
CONDA_TO_PIP = {"python-graphviz": "graphviz", "playwright-python": "playwright"}
# conda entries that are the toolchain, not a dependency pyproject.toml could list.
CONDA_ONLY = {"python", "pip"}

HEAVY_MODULES = ("matplotlib", "graphviz", "ipywidgets", "threadpoolctl", "IPython", "sklearn",
                 "scipy", "onnx", "pandas", "jax", "torch")


def _load_toml(path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads(path.read_text(encoding="utf-8"))


def _split_requirement(text: str) -> tuple[str, str]:
    """``"ipywidgets>=8"`` -> ``("ipywidgets", ">=8")``; names normalised as PEP 503 does."""
    match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*?)\s*(;.*)?",
                         text)
    assert match, f"cannot parse requirement {text!r}"
    name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
    return name, match.group(3).replace(" ", "")


def pyproject_requirements() -> dict[str, str]:
    """Core dependencies plus every extra; the self-reference ``hybridlab[...]`` is skipped."""
    project = _load_toml(ROOT / "pyproject.toml")["project"]
    entries = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        entries += extra
    pairs = [_split_requirement(entry) for entry in entries]
    return {name: spec for name, spec in pairs if name != project["name"]}


def conda_requirements(path: Path = ROOT / "environment.yml") -> dict[str, str]:
    """The conda packages of environment.yml, under their PyPI names.

    A deliberately small parser (the core must not need PyYAML): the entries are the
    ``  - name spec`` lines of the ``dependencies:`` block, stopping at its ``pip:`` list.
    """
    found: dict[str, str] = {}
    in_dependencies, item_indent = False, None
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].rstrip()
        if not text:
            continue
        if not text.startswith((" ", "-")):  # a top-level key
            in_dependencies = text == "dependencies:"
            continue
        item, indent = text.strip(), len(text) - len(text.lstrip())
        if not in_dependencies or not item.startswith("- "):
            continue
        item_indent = indent if item_indent is None else item_indent
        if indent > item_indent or item.endswith(":"):  # the `- pip:` list and its entries
            continue
        name, spec = _split_requirement(item[2:])
        if name not in CONDA_ONLY:
            found[CONDA_TO_PIP.get(name, name)] = spec
    return found


def test_split_requirement_parses_names_bounds_and_extras() -> None:
    assert _split_requirement("ipywidgets>=8") == ("ipywidgets", ">=8")
    assert _split_requirement("Scikit_Learn") == ("scikit-learn", "")
    assert _split_requirement("hybridlab[notebooks]") == ("hybridlab", "")
    assert _split_requirement("numpy >= 2, <3 ; python_version>'3'") == ("numpy", ">=2,<3")


def test_conda_parser_maps_names_and_skips_the_toolchain_and_pip_list(tmp_path: Path) -> None:
    env = tmp_path / "environment.yml"
    env.write_text("name: x\nchannels:\n- conda-forge\ndependencies:\n- python>=3.10\n"
                   "- numpy>=2  # core\n- python-graphviz\n- pip\n- pip:\n  - -e .\n  - extra\n"
                   "variables:\n  - not-a-package\n")
    assert conda_requirements(env) == {"numpy": ">=2", "graphviz": ""}


def test_pyproject_core_dependency_is_numpy_only() -> None:
    project = _load_toml(ROOT / "pyproject.toml")["project"]
    assert [_split_requirement(d)[0] for d in project["dependencies"]] == ["numpy"]


def test_pyproject_and_environment_yml_list_the_same_packages() -> None:
    pip_side, conda_side = pyproject_requirements(), conda_requirements()
    assert "numpy" in conda_side and "graphviz" in conda_side, conda_side
    only_pip = sorted(set(pip_side) - set(conda_side))
    only_conda = sorted(set(conda_side) - set(pip_side))
    assert not only_pip and not only_conda, (
        f"add {only_pip} to environment.yml and {only_conda} to pyproject.toml "
        f"(conda names map through CONDA_TO_PIP)")
    differing = {n: (pip_side[n], conda_side[n]) for n in pip_side if pip_side[n] != conda_side[n]}
    assert not differing, f"version bounds differ (pyproject, environment.yml): {differing}"


_IMPORT_PROBE = f"""
import json, sys
import hybridlab
print(json.dumps([name for name in {HEAVY_MODULES!r} if name in sys.modules]))
"""


def test_import_hybridlab_imports_nothing_heavy() -> None:
    # How long the import takes is a benchmark (benchmarks/import_time.py), not a test: a
    # shared CI machine makes any time limit flaky. What is checked here cannot be noise.
    done = subprocess.run([sys.executable, "-c", _IMPORT_PROBE], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, f"`import hybridlab` failed:\n{done.stderr}"
    heavy = json.loads(done.stdout.strip().splitlines()[-1])
    assert not heavy, (f"`import hybridlab` imported {heavy}; import them inside the "
                       f"functions that need them (viz/, profiler.py)")


def _load_sz():
    spec = importlib.util.spec_from_file_location("sz", ROOT / "tools" / "sz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sz_counts_code_but_not_docstrings_comments_or_blanks() -> None:
    sz = _load_sz()
    source = '''"""Module docstring,
over two lines."""

# a comment
import os  # trailing comment


def f(x):
    """Function docstring."""
    return (x +
            1)


class C:
    attribute = 1
    """Attribute docstring."""
    text = """a string value
spanning two lines"""
'''
    # import, def, return (two lines), class, attribute, text (two lines)
    assert sz.code_lines(source) == 8
    assert sz.code_lines("") == 0
    assert sz.code_lines("x = f'{1 + 1}'\n") == 1


def test_sz_check_reports_modules_over_budget_the_total_and_stale_budgets() -> None:
    sz = _load_sz()
    budgets = {"hybridlab/a.py": 10}
    assert sz.check({"hybridlab/a.py": 10}, budgets) == []
    assert sz.check({"hybridlab/a.py": 11}, budgets)[0].startswith("hybridlab/a.py")
    assert sz.check({"hybridlab/a.py": 10, "hybridlab/unlisted.py": sz.DEFAULT_BUDGET + 1},
                    budgets) != []
    many = {f"hybridlab/m{i}.py": 100 for i in range(sz.TOTAL_BUDGET // 100 + 1)}
    assert sz.check(many, {}) == [f"total: {sum(many.values())} code lines, "
                                  f"budget {sz.TOTAL_BUDGET}"]
    # a budget for a module that does not exist (renamed, removed) is reported
    stale = sz.check({"hybridlab/a.py": 10}, {**budgets, "hybridlab/gone.py": 50})
    assert stale and stale[0].startswith("hybridlab/gone.py")
    # and the real table has none: every budget names a module
    assert not [p for p in sz.check(sz.measure()) if "no module" in p]


def test_sz_budgets_follow_the_code_down() -> None:
    """A budget far above its module's code is a violation: budgets only go down."""
    sz = _load_sz()
    assert sz.check({"hybridlab/a.py": 100}, {"hybridlab/a.py": 100 + sz.headroom(100)}) == []
    loose = sz.check({"hybridlab/a.py": 100}, {"hybridlab/a.py": 101 + sz.headroom(100)})
    assert loose and "lower it to at most 110" in loose[0]
    assert sz.headroom(20) == 8  # small modules keep a few lines of room


def test_sz_passes_on_the_package() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "sz.py")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"tools/sz.py failed:\n{done.stdout}\n{done.stderr}"
    assert "ops:" in done.stdout and "flags:" in done.stdout


def test_the_package_version_is_the_one_pyproject_declares():
    import hybridlab

    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^version = "([^"]+)"', text, re.MULTILINE).group(1)
    assert hybridlab.__version__ == declared


def _setuptools_major() -> int:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version("setuptools").split(".")[0])
    except (PackageNotFoundError, ValueError):
        return 0


@pytest.mark.slow
def test_a_built_wheel_holds_the_package_and_nothing_else(tmp_path):
    """`pip install .` works without make: the wheel carries every subpackage (viz, ops,
    graph passes, exercises) and no tests, lessons or tools."""
    import zipfile

    # with this environment's setuptools when it meets pyproject's build requirement: an
    # isolated build fetches setuptools from the package index on every run (minutes)
    local = ["--no-build-isolation"] if _setuptools_major() >= 77 else []
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *local, "-q",
                            "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    wheel = next(tmp_path.glob("hybridlab-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("hybridlab/__init__.py", "hybridlab/viz/stepper.py", "hybridlab/ops/linalg.py",
                   "hybridlab/graph/passes/plan_memory.py", "hybridlab/exercises/lesson03.py"):
        assert module in names, module
    assert not [n for n in names if n.startswith(("tests/", "lessons/", "tools/"))]


def test_install_hints_name_the_checkout_not_an_unpublished_package() -> None:
    # hybridlab is not on PyPI: `pip install hybridlab[...]` would fetch nothing (or a
    # stranger's package). Hints say how to install the extra from the checkout.
    unpublished = re.compile(r"pip install ['\"`]?hybridlab\[")
    found = [f"{path.relative_to(ROOT)}:{number}"
             for folder in ("hybridlab", "tools", "lessons")
             for path in sorted((ROOT / folder).rglob("*")) if path.suffix in (".py", ".md")
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if unpublished.search(line)]
    assert not found, f"say `pip install -e '.[extra]'` (in the checkout) instead: {found}"


def extra_requirements(*extras: str) -> dict[str, str]:
    """What ``pip install -e '.[extras]'`` asks for: the core and the extras, with the
    extras they name (``hybridlab[dask]``) followed."""
    project = _load_toml(ROOT / "pyproject.toml")["project"]
    found, todo, seen = dict(_split_requirement(d) for d in project["dependencies"]), \
        list(extras), set()
    while todo:
        extra = todo.pop()
        seen.add(extra)
        for entry in project["optional-dependencies"][extra]:
            name, spec = _split_requirement(entry)
            if name == project["name"]:
                named = re.search(r"\[([^\]]*)\]", entry)
                todo += [e.strip() for e in named.group(1).split(",") if e.strip() not in seen]
            else:
                found[name] = spec
    return found


def test_binder_environment_is_the_notebooks_set_without_a_pip_install_of_the_checkout():
    # repo2docker builds the conda environment before it copies the checkout in, so
    # `pip: [-e .]` there fails the build; .binder/postBuild installs hybridlab afterwards.
    binder = ROOT / ".binder"
    assert conda_requirements(binder / "environment.yml") == extra_requirements("notebooks")
    text = (binder / "environment.yml").read_text(encoding="utf-8")
    assert not re.search(r"^\s*-\s*(-e\s+)?\.\s*$", text, re.MULTILINE), "no `- -e .` entry"
    post = (binder / "postBuild").read_text(encoding="utf-8")
    assert "pip install --no-deps -e ." in post and "tools/workspace.py" in post
    assert (binder / "postBuild").stat().st_mode & 0o111, "postBuild must be executable"


# --- every set-up path provides every import every lesson makes ------------------------
SETUP_PATHS = {
    "make (make venv: .[notebooks,test])": lambda: extra_requirements("notebooks", "test"),
    "pip without make (pip install -e '.[notebooks]')": lambda: extra_requirements("notebooks"),
    "conda (environment.yml)": lambda: conda_requirements(),
    "Binder (.binder/environment.yml)": lambda: conda_requirements(
        ROOT / ".binder" / "environment.yml"),
}


def _imports_of(source: str) -> set[str]:
    import ast

    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def lesson_imports() -> dict[str, set[str]]:
    """Every module outside the standard library that the lessons import -- in their code
    cells, in their solutions, and in hybridlab, which imports its drawing, ONNX and Dask
    libraries on demand -- with where; less what a ``%%requires`` cell says is optional."""
    found: dict[str, set[str]] = {}
    optional: set[str] = set()
    sources = [(path.name, cell) for path in sorted((ROOT / "lessons").glob("[0-9][0-9]-*.md"))
               for cell in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```",
                                      path.read_text(encoding="utf-8"), re.DOTALL)]
    sources += [(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
                for folder in ("hybridlab", "lessons/solutions")
                for path in sorted((ROOT / folder).rglob("*.py"))]
    for where, source in sources:
        lines = [line for line in source.splitlines() if not line.startswith(":")]
        if lines and lines[0].startswith("%%requires"):
            optional |= set(lines[0].split()[1:])
            continue
        code = "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))
        for name in _imports_of(code):
            found.setdefault(name, set()).add(where)
    outside = set(sys.stdlib_module_names) | {"hybridlab", "__future__"} | optional
    return {name: places for name, places in found.items() if name not in outside}


def _installed_closure(names: set[str]) -> set[str]:
    """``names`` and everything they require (their extras' requirements left out), as the
    distributions installed here declare it: the same resolution for every path."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement

    closure, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(re.sub(r"[-_.]+", "-", requirement.name).lower())
    return closure


def test_every_set_up_path_provides_every_import_the_lessons_make() -> None:
    import importlib.metadata as metadata

    imports = lesson_imports()
    assert {"numpy", "matplotlib", "onnxruntime", "jax", "distributed"} <= set(imports)
    owners = metadata.packages_distributions()
    unknown = sorted(set(imports) - set(owners))
    assert not unknown, f"imported by the lessons but not installed here: {unknown}"
    needed = {module: {re.sub(r"[-_.]+", "-", d).lower() for d in owners[module]}
              for module in imports}
    for path, requirements in SETUP_PATHS.items():
        provided = _installed_closure(set(requirements()))
        missing = {module: sorted(imports[module])[:3] for module, dists in needed.items()
                   if not dists & provided}
        assert not missing, (f"{path} does not install what these imports need (imported "
                             f"by): {missing}; add it to pyproject.toml's notebooks extra and "
                             f"the environment files")


def test_the_environment_files_use_conda_forges_names() -> None:
    # conda-forge has no package `playwright` (it is `playwright-python`), and `graphviz`
    # there is only the C program: a PyPI name would fail or install the wrong thing.
    for path in (ROOT / "environment.yml", ROOT / ".binder" / "environment.yml"):
        listed = {line.split("#")[0].strip()[2:].split(">")[0].split("=")[0].strip()
                  for line in path.read_text(encoding="utf-8").splitlines()
                  if line.strip().startswith("- ")}
        for pypi_name, conda_name in (("playwright", "playwright-python"),
                                      ("graphviz", "python-graphviz")):
            assert pypi_name not in listed, f"{path.name}: say {conda_name}, not {pypi_name}"


def _installed_bytes(names: set[str]) -> int:
    import importlib.metadata as metadata

    total = 0
    for name in _installed_closure(names):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        total += sum(dist.locate_file(f).stat().st_size for f in dist.files or []
                     if dist.locate_file(f).is_file())
    return total


def test_the_readme_states_the_disk_the_course_environment_takes() -> None:
    # What `make venv` installs (the notebooks and test extras and all they require), as
    # installed here; the README's figure must be within 10% of it.
    measured = _installed_bytes(set(extra_requirements("notebooks", "test"))) / 1e9
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"\(([\d.]+) GB of\s+installed packages", readme)
    assert stated, "the README's Quick start states the installed packages' size"
    assert abs(float(stated[1]) - measured) <= 0.1 * measured, (
        f"the README says {stated[1]} GB of installed packages; measured {measured:.2f} GB")
