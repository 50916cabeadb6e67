# reclaim: `make demo` and `make test` are the only commands a newcomer needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Bytecode, and pytest's rewritten test modules, are cached under .venv, outside the source tree: without the cache
# every xdist worker compiles and rewrites every test module again (collection 12 s -> 5 s).
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache

.PHONY: test test-fast fuzz demo demo-seat demo-pg bench lint screenshots venv clean system-deps pg-server prometheus

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

# Everything: both backends, the browser seat, a real Prometheus, chaos and snapshots. The longest kinds start
# first (tests/conftest.py) and idle workers take queued tests from busy ones (worksteal); the 20 slowest close it.
PYTEST := $(BIN)/python -m pytest -q -n 2 -p no:cacheprovider --dist worksteal
# Three workers on two cores: the chaos, pause and lease tests spend most of their time waiting, and a third worker
# runs other tests meanwhile (1,505 passed in 441 to 465 s of pytest, three runs, 7m22 to 7m47 wall).
test: $(STAMP) system-deps pg-server prometheus
	$(PYTEST) -n 3 --durations=20

# The edit-test loop: no server, no browser, no chaos, no process of its own, no test over a second (slow), and
# a tenth of each property's examples (docs/testing.md).
FAST_MARKS := not pg and not browser and not prometheus and not chaos and not process and not slow
test-fast: $(STAMP)
	RECLAIM_HYPOTHESIS_PROFILE=fast $(PYTEST) -m "$(FAST_MARKS)"

# The PostgreSQL half of the contract suite needs the server binaries: tests/support/pg_server.py starts a throwaway
# server (initdb + pg_ctl, unix socket in a temporary folder, fsync off) and stops it afterwards. As root
# (CI) they are installed here; otherwise those tests skip with the reason (fail with RECLAIM_REQUIRE_PG=1).
pg-server:
	@if ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "make: installing the PostgreSQL server for the tests (apt-get install postgresql)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	else \
	  echo "make: PostgreSQL server binaries not found and not root: run 'sudo apt-get install -y postgresql'" \
	       "(the PostgreSQL tests skip without them; RECLAIM_REQUIRE_PG=1 makes them fail)" >&2; \
	fi

# `reclaim metrics` is scraped by a real Prometheus in tests/system/test_prometheus.py, and promtool checks the exposition
# and docs/prometheus/ (rules and their unit tests): Debian's prometheus package brings both. As root (CI) it is
# installed here, RUNLEVEL=1 so the package's own daemon is not started (the test runs its own prometheus on a free
# loopback port with a temporary storage folder); otherwise those tests skip (fail as root or with
# RECLAIM_REQUIRE_PROMETHEUS=1).
prometheus:
	@if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "make: installing Prometheus for the tests (apt-get install prometheus)"; \
	  apt-get update -qq && RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; \
	else \
	  echo "make: prometheus/promtool not found and not root: run 'sudo apt-get install -y prometheus'" \
	       "(the Prometheus tests skip without them; RECLAIM_REQUIRE_PROMETHEUS=1 makes them fail)" >&2; \
	fi

# More hostile input through every CLI command than `make test` runs (500 examples there).
fuzz: $(STAMP)
	RECLAIM_FUZZ_EXAMPLES=$${RECLAIM_FUZZ_EXAMPLES:-5000} $(BIN)/python -m pytest -q -p no:cacheprovider tests/cli/test_fuzz_cli.py

lint: $(STAMP)
	$(BIN)/ruff check ledger console tests scripts
	$(BIN)/lint-imports
	$(BIN)/mypy ledger

demo: $(STAMP)
	$(BIN)/reclaim demo

# The demo with its browser seat: nginx (basic auth, alice or bob, the password it prints) in front of `reclaim serve`
# on a free loopback port, `[serve] public_url` set so `y` copies links that open. nginx comes from Debian.
demo-seat: SEAT_TOOLS := /usr/sbin/nginx
demo-seat: $(STAMP) system-deps
	$(BIN)/reclaim demo --seat

# The demo on PostgreSQL: a throwaway server, two worker processes on one ledger (ARGS, e.g. --no-ui --seconds 20).
demo-pg: $(STAMP) pg-server
	$(BIN)/python scripts/demo_pg.py $(ARGS)

bench: $(STAMP)
	$(BIN)/python scripts/bench.py

screenshots: $(STAMP) system-deps
	$(BIN)/python scripts/export_screenshots.py
	$(BIN)/python scripts/export_browser_seat.py

clean:
	rm -rf $(VENV) demo .pytest_cache
