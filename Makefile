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

.PHONY: help venv graphviz chromium test test-notebooks fuzz lab workspace-refresh site notebooks \
        bench clean distclean

help:
	@echo "make lab             open the lessons in JupyterLab (your copy in workspace/;"
	@echo "                     LAB_ARGS=\"--no-browser --ip=0.0.0.0\" for headless/remote)"
	@echo "make workspace-refresh  bring course updates into workspace/, keeping your edits"
	@echo "make site            the course as a static website in site/ (open site/index.html)"
	@echo "make test            line budgets (tools/sz.py), ruff, import layers, mypy, pytest, notebooks"
	@echo "make test-notebooks  only the notebook tests (nbval)"
	@echo "make fuzz            the loaders fuzzed with 10 000 examples each (FUZZ_EXAMPLES=...)"
	@echo "make notebooks       regenerate notebooks/ from lessons/ (tools/sync_notebooks.py)"
	@echo "make bench           run every benchmarks/*.py"
	@echo "make clean           remove caches and build files; make distclean also removes .venv"

# The virtual environment is rebuilt only when pyproject.toml is newer than the stamp, so
# repeated `make test` runs skip pip entirely (fast, and offline).
venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[notebooks,test]'
	@touch $(STAMP)

# apt_install(program, package, why, what happens without it): a system program pip cannot
# install. Present: nothing to do. Root: apt-get installs it, and if apt-get fails (offline,
# no such package) runs $(4). Otherwise: say the exact command and run $(4) ("exit 1" stops
# make; "true" lets the tests that need it skip).
define apt_install
	@if command -v $(1) >/dev/null 2>&1; then \
		exit 0; \
	elif [ "$$(id -u)" = "0" ]; then \
		echo "$(2): installing $(3) with apt-get"; \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $(2); } || \
			{ echo "$(2): apt-get could not install it (offline, or no such package)"; $(4); }; \
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

test: venv graphviz chromium
	$(PY) tools/sz.py
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(PY) -m pytest -q tests
	@$(MAKE) --no-print-directory test-notebooks

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

# `make lab` serves the student workspace (tools/workspace.py: a git-ignored copy of the
# notebooks, made on first use). As root (a container) it adds --allow-root; LAB_ARGS passes
# anything else, e.g. `make lab LAB_ARGS="--no-browser --ip=0.0.0.0"`. jupyter_server reads
# JUPYTER_PORT and JUPYTER_TOKEN from the environment. Stop it with Ctrl-C (twice).
LAB_ARGS ?=
lab: venv graphviz
	@$(PY) tools/workspace.py >/dev/null
	@echo "lab: serving workspace/ (your copy of notebooks/); stop with Ctrl-C."
	@echo "lab: headless or remote? open the http://127.0.0.1:...?token=... URL printed below,"
	@echo "     through an SSH tunnel if needed (ssh -L 8888:localhost:8888 host)."
	$(VENV)/bin/jupyter lab --notebook-dir=workspace \
		$$( [ "$$(id -u)" = "0" ] && echo --allow-root ) $(LAB_ARGS)

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

clean:
	rm -rf build dist site *.egg-info .pytest_cache .ruff_cache .hypothesis .mypy_cache
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
