# The two commands of the README contract, and a few helpers.
#   make demo   build in release mode and walk through the main job
#   make test   every test
SHELL := /bin/bash
CARGO ?= cargo
# Binaries land in $CARGO_TARGET_DIR when it is set (as cargo puts them).
VARVE := $(or $(CARGO_TARGET_DIR),target)/release/varve

.PHONY: demo test build bench bench-peers peers-deps bench-pds bench-pds-scale bench-part bench-runtime bench-serve bench-nats bench-object bench-schema bench-repair nats-server fuzz-part soak lint clean check-toolchain python test-python bench-python plot-deps

# The Python package (bindings/python) is built into this virtual
# environment; `make test` creates it on a fresh clone.
VENV := .venv
PY := $(VENV)/bin/python
PY_DEPS := $(VENV)/.varve-python-deps
PLOT_DEPS := $(VENV)/.varve-plot-deps

check-toolchain:
	@command -v $(CARGO) >/dev/null || { echo "error: cargo not found: install Rust (https://rustup.rs) and retry" >&2; exit 1; }

# varve-bench-peers (RocksDB and SQLite, C and C++ builds) is left out of
# build, test and lint: `make bench-peers` builds it on its own.
PEERS := --exclude varve-bench-peers

build: check-toolchain
	$(CARGO) build --release --locked --workspace $(PEERS)

demo: build plot-deps nats-server
	./scripts/demo.sh $(VARVE)

test: check-toolchain nats-server
	$(CARGO) test --locked --workspace $(PEERS)
	$(MAKE) --no-print-directory test-python

$(PY):
	python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' || { echo "error: the Python package needs python3 >= 3.9" >&2; exit 1; }
	python3 -m venv $(VENV)

# Build tools and test libraries (pinned major versions), reinstalled when the list changes.
$(PY_DEPS): bindings/python/requirements-dev.txt | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -r bindings/python/requirements-dev.txt
	touch $@

# matplotlib, for the charts (bench-pds) and the temperature example's
# causal-graph PNG (demo: scripts/render_trace.py).
plot-deps: $(PLOT_DEPS)

$(PLOT_DEPS): | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check matplotlib
	touch $@

# Build the extension (release) and install the `varve` package into .venv.
python: check-toolchain $(PY_DEPS)
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --locked --quiet -m bindings/python/Cargo.toml

# The pytest suite of the Python package, with its type checks (mypy
# --strict and stubtest, in tests/test_typing.py). tests/test_remote.py
# serves stores with the `varve` binary built here (debug, as `cargo test`
# builds it), found through VARVE_BIN.
VARVE_DEBUG := $(abspath $(or $(CARGO_TARGET_DIR),target))/debug/varve
test-python: python
	$(CARGO) build --locked -p varve-cli
	VARVE_BIN=$(VARVE_DEBUG) $(PY) -m pytest -q bindings/python/tests

# Python-vs-Rust overhead per call and batch throughput (docs/benchmarks.md).
bench-python: python
	$(PY) -m varve.bench

# QUICK=1 with bench, bench-pds, bench-runtime, bench-serve, bench-object or bench-schema: small sizes and one trial,
# a smoke run of the same code (seconds), not figures to publish; bench-pds
# then writes its CSVs and charts under target/bench/pds-quick, not docs/.
QUICK ?=

# Figures for docs/benchmarks.md (a few minutes; writes scratch files under target/bench).
bench: build
	$(VARVE) bench log --dir target/bench $(if $(QUICK),--quick --open-mib 64)

# The journal beside redb, fjall, SQLite (WAL) and RocksDB on the same
# records at matched durability (none, fsync per append, group commit from 4
# threads): appends, batches, gets, scan, disk bytes, as one ratio table
# (docs/benchmarks.md; about 5 minutes, QUICK=1 seconds, after a first build
# of about 40 minutes on 2 cores). Its own crate, crates/varve-bench-peers:
# RocksDB's build needs a C++ compiler and libclang (peers-deps installs it),
# SQLite's a C compiler; stores under target/bench, deleted after.
PEERS_BIN := $(or $(CARGO_TARGET_DIR),target)/release/varve-bench-peers
# RocksDB's bindings are generated with libclang: installed from Debian's
# packages when it is missing (as root, or through sudo).
peers-deps:
	@ldconfig -p | grep -Eq 'libclang(-[0-9.]+)?\.so' || [ -n "$$LIBCLANG_PATH" ] || { \
		command -v apt-get >/dev/null || { echo "error: libclang not found, and no apt-get to install it: install your system's libclang development package or set LIBCLANG_PATH" >&2; exit 1; }; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		echo "installing libclang-dev from Debian's packages (RocksDB's bindings need it)"; \
		$$SUDO apt-get update -q && $$SUDO apt-get install -y -q --no-install-recommends libclang-dev; \
	}

bench-peers: check-toolchain peers-deps
	$(CARGO) build --release --locked -p varve-bench-peers
	$(PEERS_BIN) --dir target/bench $(if $(QUICK),--quick)

# The runtime's figures (issue 6): trigger latency, events/s, recording
# overhead, publish throughput, each beside a baseline of the same run
# (about a minute; scratch stores under target/bench, deleted after).
bench-runtime: build
	$(VARVE) bench runtime --dir target/bench $(if $(QUICK),--quick)

# nats-server (JetStream), pinned, built from source with `go install` into
# .tools/bin (git-ignored): bench-serve measures Varve beside it, and the
# JetStream backend's tests run it, so keep this path. Needs Go (the module
# proxy); skipped when .tools/bin/nats-server already reports the version.
NATS_SERVER_VERSION := 2.15.2
NATS_SERVER := .tools/bin/nats-server
nats-server:
	@if $(NATS_SERVER) --version 2>/dev/null | grep -qx 'nats-server: v$(NATS_SERVER_VERSION)'; then \
		echo "$(NATS_SERVER) is v$(NATS_SERVER_VERSION)"; \
	else \
		command -v go >/dev/null || { echo "error: go not found: install Go (https://go.dev/dl) to build nats-server" >&2; exit 1; }; \
		echo "installing nats-server v$(NATS_SERVER_VERSION) into $(NATS_SERVER)"; \
		GOBIN=$(abspath .tools/bin) go install github.com/nats-io/nats-server/v2@v$(NATS_SERVER_VERSION); \
	fi

# varve serve on loopback (issue 11): appends/s with 1, 16 and 64 clients,
# get p50/p99, watch fan-out to 100 watchers, each beside the embedded
# journal and a JetStream server in the same run (about 6 minutes; scratch
# data under target/bench, deleted after).
bench-serve: build nats-server
	$(VARVE) bench serve --dir target/bench --nats-server $(NATS_SERVER) $(if $(QUICK),--quick)

# The Log on NATS JetStream (issue 12): appends beside raw JetStream
# publishes at R=1 and R=3, batches, get, failover (about 3 minutes; the
# servers' data under target/bench, deleted after).
bench-nats: build nats-server
	$(VARVE) bench nats --dir target/bench --nats-server $(NATS_SERVER) $(if $(QUICK),--quick)

# Versioned objects (varve-object): put/get, history(m), the paper's Git
# experiment beside the machine's `git` in the same run, verify (about a
# minute; the journal and the git repository under target/bench, deleted after).
bench-object: build
	$(VARVE) bench object --dir target/bench $(if $(QUICK),--quick)

# Schema evolution: the retention models of seeds/003 (docs/benchmarks.md, "Schema evolution").
# The plan's cost at 100k and 1M events; the pause of online repairs while
# readings arrive; then the temperature app's repair
# of one faulty day at the end of 30 days beside a run from scratch on the
# true data (which the repaired logs must equal, byte for byte).
bench-repair: build
	$(VARVE) bench repair --dir target/bench $(if $(QUICK),--quick)
	$(dir $(VARVE))temperature bench-repair --work target/bench/temperature-repair \
	  $(if $(QUICK),--days 3 --fahrenheit 1:1 --outage 30:6 --runs 1,--days 30 --fahrenheit 1:28 --outage 674:6 --runs 5)

bench-schema: build
	$(VARVE) bench schema --dir target/bench $(if $(QUICK),--quick)

# The PEDaLS evaluation (Figures 4-6): table, CSVs and PNG charts into docs/
# (several minutes). The charts need matplotlib, installed into .venv here.
PDS_OUT = $(if $(QUICK),target/bench/pds-quick,docs)
bench-pds: build plot-deps
	mkdir -p $(PDS_OUT)
	$(VARVE) bench pds --csv $(PDS_OUT)/pds_bench.csv --series-csv $(PDS_OUT)/pds_series.csv $(if $(QUICK),--workloads 2 --ops 200)
	$(PY) scripts/plot_pds.py $(PDS_OUT)/pds_series.csv $(PDS_OUT)

# One PEDaLS sorted map grown to 1,000,000 keys on the journal and in memory
# (issue 16): cost per insert, log calls, memory, disk, reopen time (about
# 5 minutes; the journal under target/bench/pds-scale, deleted after).
bench-pds-scale: build
	$(VARVE) bench pds --scale --dir target/bench $(if $(QUICK),--quick)

# PART against std, imbl, rpds, rart, vart and blart (issue 5; paper §3.6
# and §5.1): one criterion binary (crates/varve-part/benches/part.rs), then
# the ratio tables into docs/benchmarks.md ("PART") and charts into docs/part_*.png
# (about 10 minutes after the build; VARVE_BENCH_SCALE=quick: 100k keys, a few minutes).
PART_CRITERION := target/criterion-part
bench-part: check-toolchain plot-deps
	rm -rf $(PART_CRITERION)
	CRITERION_HOME=$(abspath $(PART_CRITERION)) $(CARGO) bench --locked -p varve-part --bench part
	$(PY) scripts/part_report.py $(PART_CRITERION) docs/benchmarks.md docs

# PART's fuzz target (crates/varve-part/fuzz: map operations checked against
# a BTreeMap oracle) under libFuzzer. Needs a nightly toolchain (`rustup
# toolchain install nightly`); installs cargo-fuzz if missing. `make test`
# runs the same oracle on 2,000 seeded inputs instead.
FUZZ_SECONDS ?= 300
fuzz-part: check-toolchain
	command -v cargo-fuzz >/dev/null || $(CARGO) install --locked cargo-fuzz
	cd crates/varve-part && $(CARGO) +nightly fuzz run oracle -- -max_total_time=$(FUZZ_SECONDS)

# The crash loop, longer: 1000 SIGKILLs instead of 50.
soak: check-toolchain
	VARVE_CRASH_KILLS=1000 $(CARGO) test --locked -p varve-log --test crash_loop -- --nocapture

lint: check-toolchain
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked --workspace --all-targets $(PEERS)

clean:
	$(CARGO) clean
	rm -rf varve-data
