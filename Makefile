# The two set-up commands of the README. Both create the virtual environment when it is missing.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: up test test-fast check bench faults ledger-run clean webapp lock bytecode

# Every Python package comes from a lock, pinned and hashed (any file whose hash differs is refused), then the project
# itself and its client distribution (clients/python, which the server imports) without dependencies; `pip check`
# proves the locked set is whole. `make up` installs what the service runs (requirements.lock); `make test` and the
# other development targets add the dev set (requirements-dev.lock: the same pins, plus the tests', notebooks' and
# linters' packages). uv installs the locks: 3 s for requirements.lock where pip took 44 (docs/development.md); uv
# itself comes first, by pip, from its pinned and hashed lines in requirements-dev.lock (its one pin).
UV := $(BIN)/uv
$(UV): requirements-dev.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	sed -n '/^uv==/,/# via/p' requirements-dev.lock > $(VENV)/uv-requirements.txt
	$(BIN)/pip install --quiet --require-hashes -r $(VENV)/uv-requirements.txt
	touch $(UV)

$(BIN)/gateway: pyproject.toml requirements.lock clients/python/pyproject.toml $(UV)
	$(UV) pip install --quiet --compile-bytecode --python $(BIN)/python --require-hashes -r requirements.lock
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e clients/python  # the client distribution (gateway_client)
	$(BIN)/pip check
	touch $(BIN)/gateway

DEV := $(VENV)/.dev-installed
$(DEV): $(BIN)/gateway requirements-dev.lock
	$(UV) pip install --quiet --compile-bytecode --python $(BIN)/python --require-hashes -r requirements-dev.lock
	$(BIN)/pip check
	touch $(DEV)

# After changing a dependency in pyproject.toml: both locks written again (uv, from the registry; Python 3.11 and 3.12
# on every platform). The dev set is resolved first; the runtime set is constrained to its pins, so the two agree.
lock: $(DEV)
	$(BIN)/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 --generate-hashes --quiet \
		--custom-compile-command "make lock" -o requirements-dev.lock
	$(BIN)/uv pip compile pyproject.toml --extra build --universal --python-version 3.11 --generate-hashes --quiet \
		--custom-compile-command "make lock" -c requirements-dev.lock -o requirements.lock

# The account page served at /app/ (docs/dashboard.md), built from webapp/ when its sources or lock change, or the
# sources of the TypeScript client it bundles (clients/js/src).
WEBAPP := webapp/dist/BUILT
$(WEBAPP): webapp/build webapp/build.mjs webapp/package.json webapp/package-lock.json $(wildcard webapp/src/*) \
		$(wildcard clients/js/src/*)
	./webapp/build

webapp: $(WEBAPP)

# Bytecode, compiled ahead: every Ray worker, replica, devnode and CLI process imports the same modules, and where
# Python may not write its caches (PYTHONDONTWRITEBYTECODE, as on this development machine) each process compiled them
# from source again: `import serve_app` took 11.6 s of CPU there, 4.4 s with the caches (docs/development.md). The
# locks' packages are compiled by uv at install (--compile-bytecode); the project's own sources here, only what
# changed since the last run.
SOURCES := actors bench clients/python devnode gateway geyser_proto pumpfun serve_app.py tests
bytecode: $(BIN)/gateway
	$(BIN)/python -m compileall -q -j 0 $(SOURCES) > /dev/null

up: $(BIN)/gateway $(WEBAPP) bytecode
	$(BIN)/gateway up

# The suite on two workers (pytest-xdist; tests/tiers.py): the stack tier in series on one, the process tier module by
# module beside it, in the order tests/tiers.py gives (the stack tier first). TEST_WORKERS=0: one process, in series.
# PYTEST_ARGS: more of pytest's options, e.g. a shuffled run: PYTEST_ARGS=--random-order-seed=1 (pytest-random-order,
# off unless asked; the same seed on both workers).
TEST_WORKERS ?= 2
PYTEST_ARGS ?=
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder)

test: $(DEV) $(WEBAPP) bytecode
	./ops/install-prometheus  # Debian's prometheus for the metrics test, when missing
	./ops/install-foreign-clients  # the foreign clients (tests/foreign: npm packages, solana-py's suite), when missing
	./ops/install-browser  # Debian's chromium and tests/browser's npm packages, when missing
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

# A contributor's loop: everything but the stack tier (no `gateway up`), on the same two workers.
test-fast: $(DEV) $(WEBAPP) bytecode
	./ops/install-foreign-clients
	./ops/install-browser
	$(BIN)/python -m pytest $(XDIST) -m "not stack" $(PYTEST_ARGS)

check: $(DEV)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python ops/check-doc-paths docs/architecture.md  # every path it names exists

bench: $(DEV) bytecode
	./ops/install-wrk  # Debian's wrk, the benchmarks' load generator (bench/loadgen.py), when missing
	$(BIN)/python -m bench

# The fault suite (docs/reliability.md): one stack, faults one at a time, then the checks. FAULTS_ARGS: e.g. --operations 100.
faults: $(DEV) bytecode
	$(BIN)/python -m tests.faults $(FAULTS_ARGS)
	$(BIN)/python -m tests.faults.ledger_run --operations $(LEDGER_OPERATIONS) --seed $(LEDGER_SEED)

# The in-process randomized ledger run alone (docs/reliability.md): 10^5 metered operations by default.
LEDGER_OPERATIONS ?= 100000
LEDGER_SEED ?= 7
ledger-run: $(DEV)
	$(BIN)/python -m tests.faults.ledger_run --operations $(LEDGER_OPERATIONS) --seed $(LEDGER_SEED)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
