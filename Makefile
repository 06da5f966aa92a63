# The two set-up commands: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
DATA_DIR ?= $(CURDIR)/data

.PHONY: run test lint typecheck unit venv clean proto sysdeps nodedeps tree

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(STAMP_RUN)

venv: $(STAMP_DEV)

# The main job: a local cluster (one nameserver, one broker group) and its web console
# (the URL is printed) until Ctrl-C.
run: $(STAMP_RUN)
	$(BIN)/rocketq cluster up --data-dir $(DATA_DIR)/cluster --foreground --console

# The rocketq namespace as the wheel lays it out (the folders linked under .build/src/rocketq),
# for the tools that read files instead of importing them: mypy and import-linter.
TREE := .build/src
tree: $(STAMP_DEV)
	$(BIN)/python tools/link_tree.py --out $(TREE)

# ruff, then DESIGN.md's layer rule ([tool.importlinter] in pyproject.toml). lint-imports runs
# inside the tree so that `rocketq` is the linked namespace, not the ./rocketq folder alone.
lint: tree
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	cd $(TREE) && PYTHONPATH=$(CURDIR) $(CURDIR)/$(BIN)/lint-imports --no-cache $(CURDIR)/pyproject.toml

typecheck: tree
	$(BIN)/mypy -p rocketq -p tools

# Debian packages the tests use when run as root, each pinned, installed in one apt-get
# line (an update first, once, when one is missing): iproute2 and nftables put Raft members
# in network namespaces of their own and cut them apart (chaos/netns.py); prometheus brings
# promtool (tests/deploy) and the server of `rocketq cluster up --monitor`; chromium and
# chromium-driver run the console's browser tests (tests/console/test_browser.py; no
# browser download); redis-server and nats-server are the peer brokers `rocketq bench peers`
# runs (tests/bench/test_peers_install.py checks how it finds and installs them).
sysdeps:
	@if [ "$$(id -u)" = 0 ] && ! { command -v ip && command -v nft && \
		command -v prometheus && command -v promtool && \
		command -v chromium && command -v chromedriver && \
		command -v redis-server && command -v nats-server; } >/dev/null; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -q >/dev/null; \
		apt-get install -y -q --no-install-recommends iproute2 nftables prometheus=2.42.0+ds-5+deb12u1 chromium=150.0.7871.100-1~deb12u1 chromium-driver=150.0.7871.100-1~deb12u1 redis-server=5:7.0.15-1~deb12u7 nats-server=2.9.10-1+b3 >/dev/null; \
	fi

# Node.js and npm (Debian's nodejs and npm) run ali-ons, the stock RocketMQ 4.x client of
# the conformance tests (tests/conformance); a machine that already has node and npm keeps
# its own.
nodedeps:
	@if [ "$$(id -u)" = 0 ] && ! { command -v node && command -v npm; } >/dev/null; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -q >/dev/null; \
		apt-get install -y -q --no-install-recommends nodejs=18.20.4+dfsg-1~deb12u3 npm=9.2.0~ds1-1 >/dev/null; \
	fi

# ali-ons at the version package-lock.json pins.
ALI_ONS := tests/conformance/ali_ons
$(ALI_ONS)/node_modules/.package-lock.json: $(ALI_ONS)/package-lock.json | nodedeps
	@if command -v npm >/dev/null; then \
		npm ci --prefix $(ALI_ONS) --no-audit --no-fund --loglevel=error; \
	else echo "npm is missing: the ali-ons conformance tests fail under CI, skip otherwise"; fi

# The Spark tests (tests/spark) run a local Spark whose Python workers use this venv, bound
# to loopback.
unit: $(STAMP_DEV) sysdeps $(ALI_ONS)/node_modules/.package-lock.json
	PYSPARK_PYTHON=$(CURDIR)/$(BIN)/python SPARK_LOCAL_IP=127.0.0.1 $(BIN)/pytest -q

test: lint typecheck unit

# Regenerate the protobuf modules from cluster/proto/rocketq/v1/rocketq.proto.
proto: $(STAMP_DEV)
	$(BIN)/python tools/gen_proto.py

clean:
	rm -rf $(VENV) .build .mypy_cache .pytest_cache .ruff_cache .hypothesis
