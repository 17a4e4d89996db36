# The two set-up commands of the README. Both create the virtual environment when it is missing.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: up test check bench faults ledger-run clean webapp

$(BIN)/gateway: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(BIN)/gateway

# The account page served at /app/ (docs/dashboard.md), built from webapp/ when its sources or lock change.
WEBAPP := webapp/dist/BUILT
$(WEBAPP): webapp/build webapp/build.mjs webapp/package.json webapp/package-lock.json $(wildcard webapp/src/*)
	./webapp/build

webapp: $(WEBAPP)

up: $(BIN)/gateway $(WEBAPP)
	$(BIN)/gateway up

test: $(BIN)/gateway $(WEBAPP)
	./ops/install-prometheus  # Debian's prometheus for the metrics test, when missing
	./ops/install-foreign-clients  # the foreign clients (tests/foreign: npm packages, solana-py's suite), when missing
	./ops/install-browser  # Debian's chromium and tests/browser's npm packages, when missing
	$(BIN)/python -m pytest

check: $(BIN)/gateway
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python ops/check-doc-paths docs/architecture.md  # every path it names exists

bench: $(BIN)/gateway
	$(BIN)/python -m bench

# The fault suite (docs/reliability.md): one stack, faults one at a time, then the checks. FAULTS_ARGS: e.g. --operations 100.
faults: $(BIN)/gateway
	$(BIN)/python -m tests.faults $(FAULTS_ARGS)
	$(BIN)/python -m tests.faults.ledger_run --operations $(LEDGER_OPERATIONS) --seed $(LEDGER_SEED)

# The in-process randomized ledger run alone (docs/reliability.md): 10^5 metered operations by default.
LEDGER_OPERATIONS ?= 100000
LEDGER_SEED ?= 7
ledger-run: $(BIN)/gateway
	$(BIN)/python -m tests.faults.ledger_run --operations $(LEDGER_OPERATIONS) --seed $(LEDGER_SEED)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
