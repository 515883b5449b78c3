# CrossProfile: `make book` builds the book on the embedded default; `make test` runs the tests.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
STAMP := $(VENV)/.installed

.PHONY: install test book bench clean

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY)"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e ".[test,book]"
	touch $(STAMP)

install: $(STAMP)

test: install
	$(BIN)/python -m pytest -q tests

book: install
	$(BIN)/python scripts/build_book.py

bench: install
	$(BIN)/python benchmarks/bench_grid.py

clean:
	rm -rf _build book/_build runs
