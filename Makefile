# reclaim: `make demo` and `make test` are the only commands a newcomer needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: test fuzz demo bench lint screenshots venv clean system-deps

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The browser seat's tests drive Debian's chromium (never a downloaded browser) through real nginx.
SEAT_TOOLS := /usr/bin/chromium /usr/sbin/nginx /usr/bin/openssl

system-deps:
	@missing=""; for f in $(SEAT_TOOLS); do test -x $$f || missing="$$missing $$f"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing chromium, nginx and openssl from Debian (missing:$$missing)"; \
	    apt-get update -q && RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium nginx openssl; \
	  else \
	    echo "make test: missing$$missing; the browser seat's tests need them: run" \
	         "'sudo apt-get install chromium nginx openssl' (or make test as root), then make test again" >&2; \
	    exit 1; \
	  fi; \
	fi

test: $(STAMP) system-deps
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

screenshots: $(STAMP) system-deps
	$(BIN)/python scripts/export_screenshots.py
	$(BIN)/python scripts/export_browser_seat.py

clean:
	rm -rf $(VENV) demo .pytest_cache
