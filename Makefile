# hemx: `make demo` and `make test` work on a fresh machine with Python 3.11 and make.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast bench clean venv fuzz system-deps

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# The Debian packages the tests (and the resnet demo) use: installed where we are root, else the command to run
# is printed and the tests that need them are reported as not run (scripts/system-deps.sh says which).
system-deps:
	bash scripts/system-deps.sh

# DEMO_ARGS: options for `hemx demo` (e.g. DEMO_ARGS="--workload resnet", which reads Fashion-MNIST)
DEMO_ARGS ?=
demo: $(STAMP)
	@case " $(DEMO_ARGS) " in *resnet*) bash scripts/system-deps.sh ;; esac
	$(BIN)/hemx demo $(DEMO_ARGS)

test: $(STAMP) system-deps
	HEMX_REQUIRE_NATIVE=1 $(BIN)/python -m tests.run_suite

test-fast: $(STAMP) system-deps
	HEMX_REQUIRE_NATIVE=1 $(BIN)/python -m tests.run_suite -m "not slow"

bench: $(STAMP)
	$(BIN)/hemx bench kernels

# Coverage-guided fuzzing (atheris) of hemx.io.loads and the parameter constructor, FUZZ_SECONDS per target.
# New inputs go to build/fuzz/<target> (the committed seeds stay in tests/fuzz_corpus/); findings to build/fuzz.
FUZZ_SECONDS ?= 60
fuzz: $(STAMP)
	$(BIN)/python -c "import atheris" 2>/dev/null || $(BIN)/python -m pip install --quiet "atheris>=2.3"
	@for t in loads params; do \
		mkdir -p build/fuzz/$$t && \
		PYTHONPATH=. $(BIN)/python tests/io/fuzz_targets.py $$t -max_total_time=$(FUZZ_SECONDS) -timeout=60 \
			-rss_limit_mb=4096 -artifact_prefix=build/fuzz/ build/fuzz/$$t tests/fuzz_corpus/$$t || exit 1; \
	done

clean:
	rm -rf $(VENV) build *.egg-info bench-results
