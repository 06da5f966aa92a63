# The two set-up commands: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
DATA_DIR ?= $(CURDIR)/data

.PHONY: run test lint typecheck unit venv clean proto sysdeps tree fuzz docs blocking compiled pure

# pip 25.1 reads PEP 735 dependency groups (--group).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"

# The editable install is pure Python (ROCKETQ_PURE): the compiled hot path is built in
# place by `make compiled`, which rebuilds it whenever its sources change.
# `make run` starts the console and the brokers' v2 endpoint too: the core, the console
# and the grpc extras.
$(STAMP_RUN): pyproject.toml | $(BIN)/python
	ROCKETQ_PURE=1 $(BIN)/python -m pip install --quiet -e ".[console,tls,grpc]"
	touch $@

# `make test`: every extra the tests import and the dev group (lint, test and proto tools).
$(STAMP_DEV): pyproject.toml | $(BIN)/python
	ROCKETQ_PURE=1 $(BIN)/python -m pip install --quiet -e ".[console,spark,bench,chart,fuzz,tls,grpc,profile,v5client]" --group dev
	touch $@ $(STAMP_RUN)

venv: $(STAMP_DEV)

# The main job: a local cluster (one nameserver, one broker group serving RocketMQ 5's
# clients too) and its web console (the URL is printed) until Ctrl-C.
run: $(STAMP_RUN) compiled
	$(BIN)/rocketq cluster up --data-dir $(DATA_DIR)/cluster --foreground --console --grpc

# The compiled hot path: the modules under [tool.rocketq] compiled in pyproject.toml, built
# in place with mypyc (setup.py) beside their sources when a C compiler is present, rebuilt
# when the sources of their packages change; rocketq/_compiled.json records what they were
# built from, and `import rocketq` refuses extensions older than their sources. Without a
# compiler nothing is built and the package runs as Python. `make pure` removes them.
STAMP_COMPILED := rocketq/_compiled.json
COMPILED_DEPS := setup.py pyproject.toml $(wildcard remoting/*.py common/*.py storage/*.py \
	broker/*.py broker/wire/*.py sdk/*.py)
compiled: $(STAMP_COMPILED)
$(STAMP_COMPILED): $(COMPILED_DEPS) | $(STAMP_RUN)
	@$(BIN)/python -c "import mypyc" 2>/dev/null || $(BIN)/python -m pip install --quiet "mypy>=1.14"
	$(BIN)/python setup.py --quiet build_ext --inplace

pure:
	rm -f $(STAMP_COMPILED)
	find . -path ./$(VENV) -prune -o -path ./build -prune -o -name '*.so' -print0 | xargs -0 rm -f

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

# Debian packages the tests and benchmarks use, named in tools/sysdeps.py (with what each is
# for), never pinned to a Debian revision: as root, the missing ones are installed in one
# apt-get line; then, on every machine, `apt-get install --simulate` of the whole line as a
# bare machine would run it proves it still resolves (package lists refreshed when a day
# old), naming the package that does not, and the versions in use are printed.
# The line (`python3 tools/sysdeps.py line`): iproute2 nftables prometheus chromium
# chromium-driver redis-server nats-server nodejs npm.
sysdeps:
	@$(PYTHON) tools/sysdeps.py install
	@$(PYTHON) tools/sysdeps.py check

# ali-ons at the version package-lock.json pins.
ALI_ONS := tests/conformance/ali_ons
$(ALI_ONS)/node_modules/.package-lock.json: $(ALI_ONS)/package-lock.json | $(if $(SYSDEPS_DONE),,sysdeps)
	@if command -v npm >/dev/null; then \
		npm ci --prefix $(ALI_ONS) --no-audit --no-fund --loglevel=error; \
	else echo "npm is missing: the ali-ons conformance tests fail under CI, skip otherwise"; fi

# The official RocketMQ 5 Node.js client at the version package-lock.json pins.
V5_NODEJS := tests/conformance/v5_nodejs
$(V5_NODEJS)/node_modules/.package-lock.json: $(V5_NODEJS)/package-lock.json | $(if $(SYSDEPS_DONE),,sysdeps)
	@if command -v npm >/dev/null; then \
		npm ci --prefix $(V5_NODEJS) --no-audit --no-fund --loglevel=error; \
	else echo "npm is missing: the v5 Node.js conformance tests fail under CI, skip otherwise"; fi

# The Spark tests (tests/spark) run a local Spark whose Python workers use this venv, bound
# to loopback. Three pytest workers (pytest-xdist), each taking whole test files, so that a
# file's shared Spark session, browser or Prometheus stays one; most tests wait on servers
# they started, so on two cores a third worker fills the time the others wait (the suite
# took 940 s with three, against 1,057 s for fewer tests with two).
TEST_WORKERS ?= 3
unit: $(STAMP_DEV) compiled $(if $(SYSDEPS_DONE),,sysdeps) $(ALI_ONS)/node_modules/.package-lock.json \
	$(V5_NODEJS)/node_modules/.package-lock.json
	PYSPARK_PYTHON=$(CURDIR)/$(BIN)/python SPARK_LOCAL_IP=127.0.0.1 $(BIN)/pytest -q \
		-n $(TEST_WORKERS) --dist loadfile

# The manual as a site (mkdocs.yml, docs/): a warning (a broken link, a page left out of the
# navigation, a docstring the API reference cannot read) fails the build. The site is
# written to .build/site.
docs: tree
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir .build/site

# The Debian packages first: their versions head the output, a line that no longer
# resolves stops the run before anything else. Then the environment, then the checks (ruff,
# import-linter, mypy, the docs build) beside the compiled build, two at a time (each is one
# process, the machine may have two cores), then pytest on the compiled build.
test: sysdeps
	@$(MAKE) --no-print-directory venv
	@$(MAKE) --no-print-directory -j2 --output-sync=target lint typecheck docs compiled
	@$(MAKE) --no-print-directory unit SYSDEPS_DONE=1

# Coverage-guided fuzzing of every decoder of outside bytes (bench/fuzz/, atheris): each
# harness FUZZ_SECONDS seconds in a process of its own, FUZZ_JOBS at a time; per harness the
# executions, exec/s, corpus size and findings, each finding's input under fuzz-findings/.
FUZZ_SECONDS ?= 180
FUZZ_JOBS ?= 1
fuzz: $(STAMP_DEV)
	$(BIN)/rocketq bench fuzz --seconds $(FUZZ_SECONDS) --jobs $(FUZZ_JOBS) --findings fuzz-findings

# Regenerate the protobuf modules from common/proto/rocketq/v1/rocketq.proto.
proto: $(STAMP_DEV)
	$(BIN)/python tools/gen_proto.py

# sdk/blocking.py (rocketq.sync's blocking twins), generated from the asynchronous classes;
# tests/sdk/test_blocking_generated.py fails when it is out of date.
blocking: $(STAMP_DEV)
	$(BIN)/python tools/gen_blocking.py

clean:
	rm -rf $(VENV) .build .mypy_cache .pytest_cache .ruff_cache .hypothesis
