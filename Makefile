# hybridlab developer commands. `make lab` opens the lessons, `make test` runs everything CI runs.
# Once .venv exists and pyproject.toml has not changed, no target touches the network --
# except that, run as root on a machine without `dot` or `chromium`, `make test` (and lab,
# test-notebooks) runs apt-get to install them (see apt_install below).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stamp
# Only lint the directories that exist (git does not keep empty ones in a fresh clone).
LINT_PATHS := $(wildcard hybridlab tests tools benchmarks)

export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help venv graphviz lab-graphviz chromium test test-notebooks test-frameworks test-oldest fuzz lab workspace-refresh site notebooks \
        assignments grade bench clean distclean

help:
	@echo "make lab             open the lessons in JupyterLab (your copy in workspace/;"
	@echo "                     LAB_ARGS=\"--no-browser --ip=0.0.0.0\" for headless/remote)"
	@echo "make workspace-refresh  bring course updates into workspace/, keeping your edits"
	@echo "make site            the course as a static website in site/ (open site/index.html)"
	@echo "make test            line budgets (tools/sz.py), ruff, import layers, mypy, pytest, notebooks"
	@echo "make test-notebooks  only the notebook tests (nbval)"
	@echo "make test-frameworks lesson 11's PyTorch cells and checks (needs torch, not installed"
	@echo "                     by make venv: see the target)"
	@echo "make test-oldest     make site and the fast tests under the oldest Python (3.11)"
	@echo "make fuzz            the loaders (ONNX import too) fuzzed with 10 000 examples each"
	@echo "                     (FUZZ_EXAMPLES=...)"
	@echo "make notebooks       regenerate notebooks/ from lessons/ (tools/sync_notebooks.py) and"
	@echo "                     the README's minutes (tools/pacing.py)"
	@echo "make assignments     the nbgrader course in course/: one assignment per lesson"
	@echo "make grade           autograde course/submitted/, each submission in a sandbox"
	@echo "make bench           run every benchmarks/*.py"
	@echo "make clean           remove caches and build files (keeping what needs the network:"
	@echo "                     the virtualenvs, the site's scripts); make distclean removes all"

# The virtual environment is rebuilt only when pyproject.toml is newer than the stamp, so
# repeated `make test` runs skip pip entirely (fast, and offline).
venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "venv: installing hybridlab with its notebooks and test extras into $(VENV) (the"
	@echo "venv: first time: ~1.4 GB to fetch and unpack, several minutes; pip says what it does)"
	$(PY) -m pip install -e '.[notebooks,test]'
	@$(NBGRADER_UI_OFF)
	@touch $(STAMP)

# nbgrader (the instructor extra, which `test` pulls in) switches its JupyterLab interface
# on in this environment; the course grades from the command line (README, "Teaching with
# hybridlab"), so a student's `make lab` stays as it was: the interface is switched off.
NBGRADER_SERVER := $(addprefix nbgrader.server_extensions.,formgrader validate_assignment \
                   assignment_list course_list)
define NBGRADER_UI_OFF
{ $(VENV)/bin/jupyter labextension disable --level=sys_prefix @jupyter/nbgrader && \
  $(VENV)/bin/jupyter server extension disable --sys-prefix $(NBGRADER_SERVER); } \
	>/dev/null 2>&1 || echo "venv: could not switch nbgrader's JupyterLab interface off"
endef

# apt_install(program, package, why, what happens without it): a system program pip cannot
# install. Present: nothing to do. Root: apt-get installs it (waiting up to APT_LOCK_WAIT
# seconds for another apt-get or dpkg to release its lock), and if apt-get fails prints its
# last lines -- the real cause -- and runs $(4). Otherwise: say the exact command and run $(4)
# ("exit 1" stops make; "true" lets the tests that need it skip).
APT_LOCK_WAIT ?= 600
APT_GET := apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_WAIT)
define apt_install
	@if command -v $(1) >/dev/null 2>&1; then \
		exit 0; \
	elif [ "$$(id -u)" = "0" ]; then \
		echo "$(2): installing $(3) with apt-get (waiting up to $(APT_LOCK_WAIT) s for the dpkg lock)"; \
		log=$$( { $(APT_GET) update && DEBIAN_FRONTEND=noninteractive \
			$(APT_GET) install -y $(2); } 2>&1 ) || \
			{ echo "$(2): apt-get could not install it; its last words:"; \
			  printf '%s\n' "$$log" | tail -n 4 | sed 's/^/    /'; $(4); }; \
	else \
		echo "$(2): '$(1)' is missing ($(3)). Install it with:"; \
		echo "    sudo apt-get update && sudo apt-get install -y $(2)"; \
		$(4); \
	fi
endef

# The graphviz Python package only calls the `dot` program; pip cannot install it.
# (macOS: brew install graphviz; conda: conda env create -f environment.yml)
graphviz:
	$(call apt_install,dot,graphviz,the program that draws the lessons' graphs,exit 1)

# The browser test (tests/browser) drives Debian's chromium through Playwright; Playwright
# never downloads a browser here. Without root we only say how: those tests then skip.
chromium:
	$(call apt_install,chromium,chromium,the browser of tests/browser; they skip without it,true)

# Every step runs even when one before it failed (then `make test` fails at the end), and
# the closing table gives each step's time (tools/steps.py; also in build/test-steps.txt).
# pytest lists its slowest tests (--durations) so a test that grew slow is seen at once.
test: venv graphviz chromium
	@$(PY) tools/steps.py --summary build/test-steps.txt \
		"line budgets=$(PY) tools/sz.py" \
		"ruff=$(VENV)/bin/ruff check $(LINT_PATHS)" \
		"import layers=$(VENV)/bin/lint-imports" \
		"mypy=$(VENV)/bin/mypy" \
		"pytest=$(PY) -m pytest -q --durations=15 tests" \
		"notebooks=make --no-print-directory test-notebooks" \
		"oldest python=make --no-print-directory test-oldest"

# The oldest Python pyproject.toml accepts, as a newcomer has it: Debian 12's own python3
# (3.11.2). In a second virtualenv made from it (kept, like .venv, until pyproject.toml
# changes): `make site` and the fast tests (OLDEST_TESTS). Skipped, saying so, where that
# interpreter is missing.
OLDEST_PYTHON ?= /usr/bin/python3
OLDEST_VENV   := build/venv-oldest
OLDEST_TESTS  ?= tests/test_setup.py tests/test_build_site.py tests/test_ndarray_io.py \
                 tests/test_symbol_json.py tests/test_workspace.py tests/test_atomic_writes.py
test-oldest:
	@if ! [ -x "$(OLDEST_PYTHON)" ]; then \
		echo "test-oldest: $(OLDEST_PYTHON) not found, skipped"; exit 0; fi; \
	if ! [ -f $(OLDEST_VENV)/.stamp ] || [ pyproject.toml -nt $(OLDEST_VENV)/.stamp ]; then \
		rm -rf $(OLDEST_VENV) && $(OLDEST_PYTHON) -m venv $(OLDEST_VENV) || { \
			echo "test-oldest: could not make a venv (apt-get install python3-venv)"; exit 1; }; \
		echo "test-oldest: installing the same packages into $(OLDEST_VENV) (first time: several minutes)"; \
		$(OLDEST_VENV)/bin/python -m pip install -e '.[notebooks,test]' && \
		touch $(OLDEST_VENV)/.stamp || exit 1; \
	fi; \
	vendor=; if ! command -v npm >/dev/null 2>&1 && ! [ -f build/site-vendor/require.js ]; then \
		vendor=--no-vendor; echo "test-oldest: no npm, so the site is built without its scripts"; fi; \
	echo "test-oldest: $$($(OLDEST_VENV)/bin/python --version), make site and the fast tests"; \
	$(OLDEST_VENV)/bin/python tools/build_site.py $$vendor --out build/site-oldest >/dev/null && \
	$(OLDEST_VENV)/bin/python -m pytest -q -p no:cacheprovider -m "not slow and not browser and not fuzz" \
		$(OLDEST_TESTS)

# ---- Notebook tests (the course engineer owns NBVAL_ARGS and tests/nbval_sanitize.cfg) ----
# Runs only when notebooks/*.ipynb exist, so the target is a no-op until lessons are built.
NBVAL_ARGS ?= --nbval notebooks/ --nbval-current-env \
              --nbval-sanitize-with tests/nbval_sanitize.cfg
NOTEBOOKS  := $(wildcard notebooks/*.ipynb)

test-notebooks: venv graphviz
ifeq ($(NOTEBOOKS),)
	@echo "test-notebooks: no notebooks/*.ipynb yet, nothing to run"
else
	$(PY) -m pytest -q $(NBVAL_ARGS)
endif
# ---- end of notebook tests ----

# Lessons 11 and 12's PyTorch cells (`%%requires torch`) and the torch half of lesson 11's
# exercise tests.
# `make test` skips them where torch is missing: torch from the package registry pulls
# several GB of CUDA libraries, so it is never a dependency. A CPU-only build is enough:
#     .venv/bin/pip install torch==2.13.0 onnxscript --index-url https://download.pytorch.org/whl/cpu
# (onnxscript: torch.onnx.export needs it; 2.13.0: the version lesson 11's outputs come from). Here torch must be importable, or this fails.
FRAMEWORK_NOTEBOOKS := $(wildcard notebooks/11-*.ipynb notebooks/12-*.ipynb)
test-frameworks: venv graphviz
	@$(PY) -c "import torch, onnxscript" 2>/dev/null || { \
		echo "test-frameworks: torch and onnxscript are not installed in $(VENV); install a CPU-only build:"; \
		echo "    $(VENV)/bin/pip install torch==2.13.0 onnxscript --index-url https://download.pytorch.org/whl/cpu"; \
		exit 1; }
	$(PY) -m pytest -q -rs tests/test_lessons.py tests/test_exercises.py -k lesson11
	$(PY) -m pytest -q -rs $(filter-out notebooks/,$(NBVAL_ARGS)) $(FRAMEWORK_NOTEBOOKS)

# `make lab` serves the student workspace (tools/workspace.py: a git-ignored copy of the
# notebooks, made on first use). As root (a container) it adds --allow-root; LAB_ARGS passes
# anything else, e.g. `make lab LAB_ARGS="--no-browser --ip=0.0.0.0"`. jupyter_server reads
# JUPYTER_PORT and JUPYTER_TOKEN from the environment; the banner shows the real ones.
# `dot` is checked first (before any pip work) and is optional here: without it the
# notebooks show each graph's text. JupyterLab is exec'ed, so it *is* the recipe's process:
# Ctrl-C or a SIGTERM to make stops it, never leaving it serving as an orphan.
LAB_ARGS ?=
JUPYTER  ?= $(VENV)/bin/jupyter
lab: lab-graphviz venv
	@$(PY) tools/workspace.py >/dev/null
	@port=$${JUPYTER_PORT:-8888}; \
	echo "lab: serving workspace/ (your copy of notebooks/) on port $$port; stop with Ctrl-C."; \
	if [ -n "$${JUPYTER_TOKEN:-}" ]; then \
		echo "lab: open http://127.0.0.1:$$port/lab?token=$$JUPYTER_TOKEN (the JUPYTER_TOKEN you set)"; \
	else \
		echo "lab: headless or remote? open the http://127.0.0.1:$$port/lab?token=... URL printed below"; \
	fi; \
	echo "     (from another machine through an SSH tunnel: ssh -L $$port:localhost:$$port host)"; \
	exec $(JUPYTER) lab --notebook-dir=workspace \
		$$( [ "$$(id -u)" = "0" ] && echo --allow-root ) $(LAB_ARGS)

lab-graphviz:
	$(call apt_install,dot,graphviz,the lessons' drawings; without it they show as text,true)

workspace-refresh: venv
	$(PY) tools/workspace.py --refresh

# The course as a static website in site/ (open site/index.html; no server, no network once
# built). The first build fetches the widget manager, require.js and MathJax with npm.
site: venv
	$(PY) tools/build_site.py --out site

notebooks: venv
	@test -f tools/sync_notebooks.py || \
		{ echo "notebooks: tools/sync_notebooks.py does not exist yet (course engineer)"; exit 1; }
	$(PY) tools/sync_notebooks.py
	$(PY) tools/pacing.py --write

# The course as nbgrader assignments (README, "Teaching with hybridlab"): course/source/
# built from lessons/ and lessons/solutions/, course/release/ the student versions.
# ASSIGNMENTS="03 05" builds only those lessons.
assignments: venv
	$(PY) tools/assignments.py $(ASSIGNMENTS)

# Autograde what is in course/submitted/<student>/<assignment>/ (GRADE_ARGS: limits,
# assignments; see `python3 tools/grade.py --help`): grades.csv and feedback/.
grade: venv
	$(PY) tools/grade.py $(GRADE_ARGS)

# The loaders' fuzz tests with 10 000 examples each (make test runs 200): every mutated
# or random file must give ModelFileError / ArrayFileError or load correctly.
fuzz: venv
	HYBRIDLAB_FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-10000} $(PY) -m pytest -q -m fuzz \
		-p no:cacheprovider tests/test_fuzz_loaders.py

bench: venv
	@set -e; found=0; \
	for script in benchmarks/*.py; do \
		[ -f "$$script" ] || continue; \
		found=1; echo "== $$script"; $(PY) "$$script"; \
	done; \
	[ "$$found" = 1 ] || echo "bench: no benchmarks/*.py yet"

# clean keeps what would need the network again: .venv, build/venv-oldest (pip) and
# build/site-vendor (npm); distclean removes them too.
clean:
	find build -mindepth 1 -maxdepth 1 ! -name venv-oldest ! -name site-vendor \
		-exec rm -rf {} + 2>/dev/null || true
	rm -rf dist site *.egg-info .pytest_cache .ruff_cache .hypothesis .mypy_cache
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) build
