# The two commands of the README contract, and a few helpers.
#   make demo   build in release mode and walk through the main job
#   make test   every test
SHELL := /bin/bash
CARGO ?= cargo
VARVE := target/release/varve

.PHONY: demo test build bench bench-pds soak lint clean check-toolchain python test-python bench-python

# The Python package (bindings/python) is built into this virtual
# environment; `make test` creates it on a fresh clone.
VENV := .venv
PY := $(VENV)/bin/python
PY_DEPS := $(VENV)/.varve-python-deps

check-toolchain:
	@command -v $(CARGO) >/dev/null || { echo "error: cargo not found: install Rust (https://rustup.rs) and retry" >&2; exit 1; }

build: check-toolchain
	$(CARGO) build --release --locked --workspace

demo: build
	./scripts/demo.sh $(VARVE)

test: check-toolchain
	$(CARGO) test --locked --workspace
	$(MAKE) --no-print-directory test-python

$(PY):
	python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' || { echo "error: the Python package needs python3 >= 3.9" >&2; exit 1; }
	python3 -m venv $(VENV)

# Build tools and test libraries (pinned major versions), reinstalled when the list changes.
$(PY_DEPS): bindings/python/requirements-dev.txt | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -r bindings/python/requirements-dev.txt
	touch $@

# Build the extension (release) and install the `varve` package into .venv.
python: check-toolchain $(PY_DEPS)
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --locked --quiet -m bindings/python/Cargo.toml

# The pytest suite of the Python package.
test-python: python
	$(PY) -m pytest -q bindings/python/tests

# Python-vs-Rust overhead per call and batch throughput (docs/benchmarks.md).
bench-python: python
	$(PY) -m varve.bench

# Figures for docs/benchmarks.md (a few minutes; writes scratch files under target/bench).
bench: build
	$(VARVE) bench log --dir target/bench

# The PEDaLS evaluation (Figures 4-6): table, CSVs and PNG charts into docs/
# (several minutes). The charts need matplotlib, installed into .venv here.
bench-pds: build
	$(VARVE) bench pds --csv docs/pds_bench.csv --series-csv docs/pds_series.csv
	test -x .venv/bin/python || python3 -m venv .venv
	.venv/bin/python -m pip install --quiet matplotlib
	.venv/bin/python scripts/plot_pds.py docs/pds_series.csv docs

# The crash loop, longer: 1000 SIGKILLs instead of 50.
soak: check-toolchain
	VARVE_CRASH_KILLS=1000 $(CARGO) test --locked -p varve-log --test crash_loop -- --nocapture

lint: check-toolchain
	$(CARGO) clippy --locked --workspace --all-targets

clean:
	$(CARGO) clean
	rm -rf varve-data
