# hybridlab developer commands. `make lab` opens the lessons, `make test` runs everything CI runs.
# Once .venv exists and pyproject.toml has not changed, no target touches the network.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stamp
# Only lint the directories that exist (git does not keep empty ones in a fresh clone).
LINT_PATHS := $(wildcard hybridlab tests tools benchmarks)

export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help venv graphviz chromium test test-notebooks lab notebooks bench clean distclean

help:
	@echo "make lab             open the lessons in JupyterLab (creates .venv on first use)"
	@echo "make test            line budgets (tools/sz.py), ruff, pytest, notebook tests"
	@echo "make test-notebooks  only the notebook tests (nbval)"
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

# The graphviz Python package only calls the `dot` program; pip cannot install it.
graphviz:
	@if command -v dot >/dev/null 2>&1; then \
		exit 0; \
	elif [ "$$(id -u)" = "0" ]; then \
		echo "graphviz: installing the 'dot' program with apt-get"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y graphviz; \
	else \
		echo "graphviz: the 'dot' program is missing. Install it with:"; \
		echo "    sudo apt-get update && sudo apt-get install -y graphviz"; \
		echo "(macOS: brew install graphviz; conda: conda env create -f environment.yml)"; \
		exit 1; \
	fi

# The browser test (tests/browser) drives Debian's chromium through Playwright; Playwright
# never downloads a browser here. Without root we only say how: those tests then skip.
chromium:
	@if command -v chromium >/dev/null 2>&1; then \
		exit 0; \
	elif [ "$$(id -u)" = "0" ]; then \
		echo "chromium: installing the browser for tests/browser with apt-get"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	else \
		echo "chromium: missing, so the browser tests will be skipped. Install it with:"; \
		echo "    sudo apt-get update && sudo apt-get install -y chromium"; \
	fi

test: venv graphviz chromium
	$(PY) tools/sz.py
	$(VENV)/bin/ruff check $(LINT_PATHS)
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

lab: venv graphviz
	$(VENV)/bin/jupyter lab notebooks/

notebooks: venv
	@test -f tools/sync_notebooks.py || \
		{ echo "notebooks: tools/sync_notebooks.py does not exist yet (course engineer)"; exit 1; }
	$(PY) tools/sync_notebooks.py

bench: venv
	@set -e; found=0; \
	for script in benchmarks/*.py; do \
		[ -f "$$script" ] || continue; \
		found=1; echo "== $$script"; $(PY) "$$script"; \
	done; \
	[ "$$found" = 1 ] || echo "bench: no benchmarks/*.py yet"

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .hypothesis .mypy_cache
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
