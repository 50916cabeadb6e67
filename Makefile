# reclaim: `make demo` and `make test` are the only commands a newcomer needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: test fuzz demo bench lint screenshots venv clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -p no:cacheprovider

# More hostile input through every CLI command than `make test` runs (500 examples there).
fuzz: $(STAMP)
	RECLAIM_FUZZ_EXAMPLES=$${RECLAIM_FUZZ_EXAMPLES:-5000} $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_fuzz_cli.py

lint: $(STAMP)
	$(BIN)/ruff check ledger console tests scripts
	$(BIN)/lint-imports
	$(BIN)/mypy ledger

demo: $(STAMP)
	$(BIN)/reclaim demo

bench: $(STAMP)
	$(BIN)/python scripts/bench.py

screenshots: $(STAMP)
	$(BIN)/python scripts/export_screenshots.py

clean:
	rm -rf $(VENV) demo .pytest_cache
