# p4reduce — the commands a user and CI run. `make install` and `make test` need neither p4c
# nor bmv2: the committed p4c outputs in p4src/build/ run on softswitch.
SHELL := /bin/bash
PYTHON ?= /usr/bin/python3
VENV ?= .venv
PY := $(VENV)/bin/python
P4C ?= p4c-bm2-ss
DEBIAN_PACKAGES := python3-venv python3-dev iproute2 mininet ethtool tcpdump gcc

.PHONY: install install-torch install-examples install-bench test lint p4 p4-tofino run example bench bench-example bench-example-blocks bench-example-drift bench-peers clean

install:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	else echo "not root or no apt-get: install $(DEBIAN_PACKAGES) yourself"; fi
	# Debian's python3 with system site-packages: Debian's mininet is importable from the venv.
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@echo "installed into $(VENV); run: make test"

# Optional: CPU PyTorch for the torch.distributed backend and the DDP hook (their tests
# skip, saying so, without it).
install-torch:
	$(PY) -m pip install -q 'torch==2.13.0'

# Optional: matplotlib for the example's plot (the `examples` extra).
install-examples: install-torch
	$(PY) -m pip install -q -e '.[examples]'

# Optional: matplotlib for the benchmark's plots (the `bench` extra).
install-bench:
	$(PY) -m pip install -q -e '.[bench]'

# The suite in TEST_WORKERS processes (pytest-xdist): much of it waits on switches, timers
# and sockets rather than computing, so three processes on two cores finish it far sooner.
# Tests that build a Mininet network share one process, one after another (conftest.py:
# Mininet's node and interface names are global); TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 3
test:
	$(PY) -m pytest -q -ra -n $(TEST_WORKERS) --dist loadgroup

# ruff's checks and its formatter's layout (configured in pyproject.toml); .ci/run runs it
lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Regenerate every committed p4c output (+ manifest) with the one p4src/compile.py:
# p4src/build/, each test program's tests/<suite>/p4/build/<name>/ and each benchmark
# program's bench/p4/build/<name>/ (bench/wide_blocks.py). Needs p4c-bm2-ss.
p4:
	$(PYTHON) p4src/compile.py --p4c $(P4C)
	for program in tests/*/p4/*.p4 bench/p4/*.p4; do $(PYTHON) p4src/compile.py --p4c $(P4C) $$program || exit 1; done

# Regenerate p4src/build/tofino/ and tofino2/ (the production builds) and tofino-test/,
# tofino2-test/ (the test builds, with the drop simulator): P4Info, bf-rt.json,
# context.json, resource summary, manifest, from p4src/tna/; needs p4c's Tofino backend
# (docs/tofino.md).
# TOFINO_P4C: its `p4c` driver (default: the build docs/tofino.md describes, else PATH).
TOFINO_P4C ?= $(firstword $(wildcard /opt/tofino/build-p4c/p4c) p4c)
p4-tofino:
	$(PYTHON) p4src/compile.py --target tofino --p4c $(TOFINO_P4C)
	$(PYTHON) p4src/compile.py --target tofino2 --p4c $(TOFINO_P4C)
	$(PYTHON) p4src/compile.py --target tofino --drop-simulator --p4c $(TOFINO_P4C)
	$(PYTHON) p4src/compile.py --target tofino2 --drop-simulator --p4c $(TOFINO_P4C)

# The end-to-end demo on the embedded default (softswitch unless simple_switch_grpc exists).
# A bad value (SIZE <= 0, LOSS outside [0, 1), an unknown TARGET, ...) is one error line
# naming the variable, exit code 2 from demo.py; `--x='$(X)'` (each option from the variable
# of its name in capitals: demo.py's MAKE_RUN) so that negative values reach the check.
WORKERS ?= $(if $(filter two-level,$(TOPO)),8,4)
SIZE ?= 1000000
DENSITY ?= 0.1
DTYPE ?= float32
LOSS ?= 0
TARGET ?= auto
# TOPO: star (one switch) or two-level (a spine and two leaves; docs/fabric.md)
TOPO ?= star
run:
	$(PY) mininet/demo.py --workers='$(WORKERS)' --size='$(SIZE)' --density='$(DENSITY)' \
	  --dtype='$(DTYPE)' --loss='$(LOSS)' --target='$(TARGET)' --topo='$(TOPO)' $(RUN_ARGS)

# Train a click model through the switch and through gloo (4 ranks in Mininet), compare,
# plot: examples/out/results.json, examples/out/clicks.png. Needs install-examples.
# BLOCK_VALUES: the p4reduce job's values per block (empty: the example's, 1 024, around
# where its step through softswitch is shortest: docs/benchmarks.md, "The click example at
# each block size"); a job of wider frames raises its links, and gloo runs at that MTU too.
STEPS ?= 300
BLOCK_VALUES ?=
EXAMPLE_TARGET = $(if $(filter auto,$(TARGET)),softswitch,$(TARGET))
example:
	$(PY) examples/clicks_switch.py --workers $(WORKERS) --steps $(STEPS) \
	  --target $(EXAMPLE_TARGET) \
	  $(if $(BLOCK_VALUES),--block-values $(BLOCK_VALUES)) $(EXAMPLE_ARGS)

# Every figure the docs state: p4reduce against gloo on the same Mininet hosts, density
# sweep, scaling, line-rate projection (tables and plots); the headline cases at each block
# size and round mode (README's numbers), the block density of two gradients at each size,
# the switches' and the worker's packet rates, memory, loss recovery, fairness, the wide-block
# candidates, a SKIP round's cost, the slot window, where a call's CPU goes beside gloo's,
# bmv2's work per packet, and the click example (bench-example, and at each block size).
# The full run rewrites the generated parts
# of docs/benchmarks.md, docs/hostlib.md, docs/pytorch.md and README.md, their results in
# docs/bench/ and the images there; QUICK=1 (a few minutes) writes to build/bench/ only. gloo
# needs `make install-torch`, plots `make install-bench`.
QUICK ?=
bench:
ifeq ($(QUICK),)
	$(PY) bench/softswitch_pps.py --json docs/bench/softswitch_pps.json --markdown --command 'make bench'
	$(PY) bench/hostlib_pps.py --json docs/bench/hostlib_pps.json --markdown --command 'make bench'
	$(PY) bench/memory.py --json docs/bench/memory.json --markdown --command 'make bench'
	$(PY) bench/suite.py --out docs/bench --docs --command 'make bench'
	$(PY) bench/suite.py --headline --passes 2 --out docs/bench --docs --command 'make bench'
	$(PY) bench/block_density.py --json docs/bench/block_density.json --markdown --command 'make bench'
	$(PY) bench/fabric.py --mininet --json docs/bench/fabric.json --markdown --command 'make bench'
	$(PY) bench/sparse_ratio.py --json build/bench/sparse_ratio.json
	$(PY) bench/loss_recovery.py --markdown --json docs/bench/loss_recovery_softswitch.json --command 'make bench'
	$(PY) bench/fairness.py --markdown --json docs/bench/fairness_softswitch.json --command 'make bench'
	$(MAKE) bench-example
	$(MAKE) bench-example-blocks
	$(MAKE) bench-example-drift
	$(PY) bench/wide_blocks.py --seconds 1 --repeat 5 --json docs/bench/wide_blocks.json --markdown \
	  --command 'make bench'
	$(PY) bench/round_cost.py --mininet --cases dense dense:0.344 independent:0.1 zipf shared:0.1 \
	  --json docs/bench/round_cost.json --markdown --command 'make bench'
	$(PY) bench/slot_window.py --json docs/bench/slot_window.json --markdown --command 'make bench'
	$(PY) bench/call_breakdown.py --values 16000 --modes every_rank,silent \
	  --density 1,0.1,0 --repeat 20 --gloo 64048 --json docs/bench/call_breakdown.json --markdown \
	  --command 'make bench'
	if command -v simple_switch_grpc >/dev/null; then \
	  $(PY) bench/loss_recovery.py --target simple_switch_grpc --skip-spurious --markdown \
	    --json docs/bench/loss_recovery_simple_switch_grpc.json --command 'make bench' && \
	  $(PY) bench/fairness.py --target simple_switch_grpc --markdown \
	    --json docs/bench/fairness_simple_switch_grpc.json --command 'make bench' && \
	  $(PY) bench/primitives.py --json docs/bench/primitives.json --markdown --command 'make bench' && \
	  $(MAKE) bench-example TARGET=simple_switch_grpc; \
	else echo "simple_switch_grpc not on PATH: loss and fairness benchmarks on softswitch only, no per-packet counts"; fi
else
	$(PY) bench/suite.py --quick --out build/bench --command 'make bench QUICK=1'
endif

# The click example as a benchmark (run by `make bench`, through softswitch and, where it
# is installed, simple_switch_grpc): both backends through the same hosts and switch,
# p4reduce in silent rounds; rewrites the target's generated section of docs/pytorch.md
# from docs/bench/clicks.json (softswitch) or docs/bench/clicks_<target>.json. Needs
# install-torch.
bench-example:
	$(PY) bench/clicks.py --steps 100 --target $(EXAMPLE_TARGET) \
	  --json docs/bench/clicks$(if $(filter-out softswitch,$(EXAMPLE_TARGET)),_$(EXAMPLE_TARGET)).json \
	  --markdown --command 'make bench-example$(if $(filter-out softswitch,$(EXAMPLE_TARGET)), TARGET=$(EXAMPLE_TARGET))'

# A public course-lab solution and p4reduce (packed and lanes) on the same simple_switch_grpc,
# one table (docs/course-baseline.md). PEER: a checkout of the peer's repository (its code is
# not copied here); IMPL: j-udp (default, also run with its logging removed), y-udp, y-eth.
# The peer's workers run with scapy 2.5.0 from their own venv, build/peer-venv.
PEER ?=
IMPL ?= j-udp
PEER_VENV := build/peer-venv
bench-example-blocks:
	$(PY) bench/clicks.py --steps 40 --block-sizes 64 256 1024 2048 4096 8192 16000 \
	  --target $(EXAMPLE_TARGET) \
	  --json docs/bench/clicks_blocks.json --markdown --command 'make bench-example-blocks'

# How far two correct trainings of the example part (run by `make bench`): its training in
# one process with p4reduce's sums, exact sums and float32 sums in rank order, at 64 values
# per block and at the example's; rewrites docs/pytorch.md's "The late drift" table, the
# evidence behind the example's two tolerances. Needs install-torch; no root.
bench-example-drift:
	$(PY) bench/clicks_drift.py --steps 300 --block-sizes 64 1024 \
	  --json docs/bench/clicks_drift.json --markdown --command 'make bench-example-drift'

bench-peers: $(PEER_VENV)/bin/python
	@test -n '$(PEER)' || { echo "usage: make bench-peers PEER=<checkout of the peer's repository> [IMPL=j-udp|y-udp|y-eth]"; exit 2; }
	$(PY) bench/course_lab.py --peer '$(PEER)' --impl '$(IMPL)' $(if $(filter j-udp,$(IMPL)),--no-log) \
	  --peer-python $(PEER_VENV)/bin/python --json build/bench/course_lab.json $(PEER_ARGS)

$(PEER_VENV)/bin/python:
	$(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/pip install -q 'scapy==2.5.0'

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache examples/out
