# One venv, created on demand; every target below depends on it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test check run lint bench clean agent-clis bytecode

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@# the distribution was named vigil before it was vigil-agent-loop: drop the old one
	$(BIN)/pip uninstall --quiet --yes vigil 2>/dev/null || true
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/vulture

# Every test: on three workers (pytest-xdist; each has its own temporary folders and
# PostgreSQL server; a test file stays on one worker, so a module's fixtures are
# built once; files are handed out in collection order, the slow tier first). Much
# of the suite waits on subprocesses, so a third worker on two cores finishes
# sooner. Then the two that judge throughput against a clock, without the rest: the
# soak and the simulated day, side by side: the soak keeps about one core busy for
# 16 s, the day a quarter of one for a minute, so on two cores neither measures the
# other. The 20 slowest are listed at the end so a regression shows. The second
# run starts even when the first failed (one failure must not hide the tests that
# run alone), and `make test` fails at the end if either did. Last, one block counts
# the tests both runs skipped, by reason (tests/skips.py), so a green run that left
# something out says so. Every test's duration in the last run is kept, slowest
# first, in $(DURATIONS) (tests/durations.py), the run before in
# $(DURATIONS).previous: compare the two to see a test grown slow. The real agent CLIs are installed first (agent-clis).
PYTEST_PARALLEL ?= -n 3 --dist loadfile --no-loadscope-reorder
DURATIONS := .test-durations

test: lint bytecode agent-clis
	skips=$$(mktemp) || exit 1; status=0; [ ! -f $(DURATIONS) ] || mv -f $(DURATIONS) $(DURATIONS).previous; \
	$(BIN)/pytest $(PYTEST_PARALLEL) -m "not alone" --durations=20 --skip-report=$$skips --durations-file=$(DURATIONS) || status=1; \
	$(BIN)/pytest -n 2 --dist loadfile -m alone --durations=5 --skip-report=$$skips --durations-file=$(DURATIONS) || status=1; \
	echo; $(BIN)/python -m tests.skips $$skips || status=1; \
	rm -f $$skips; exit $$status

# The project's modules compiled once, up front. Where PYTHONDONTWRITEBYTECODE is
# set (container images often set it), Python writes no cache, so every `vigil`
# process a test starts would compile them again; compileall writes the cache
# regardless, and is a no-op for modules that have not changed.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q vigil dispatch sensors tui tests bench

# The inner loop: lint, then the fast tier (each test module declares its tier: tests/test_tiers.py).
check: lint bytecode
	$(BIN)/pytest $(PYTEST_PARALLEL) -m "not slow" --durations=10

# The real agent CLIs at the versions the tests pin (tests/agents/clis.py), installed
# outside the tree (AGENT_CLIS); `make test` runs this first. Without node/npm, or
# when npm cannot install them (offline), this says so and does not fail: the
# real-agent tests are then skipped, and the skip summary at the end of `make test`
# counts them.
AGENT_CLIS ?= $(HOME)/.cache/vigil/agent-clis
CLAUDE_VERSION := 2.1.197
CODEX_VERSION := 0.171.0
agent-clis:
	@if [ "$$($(AGENT_CLIS)/node_modules/.bin/claude --version 2>/dev/null)" = "$(CLAUDE_VERSION) (Claude Code)" ] \
		&& $(AGENT_CLIS)/node_modules/.bin/codex --version 2>/dev/null | grep -qx "codex-cli $(CODEX_VERSION)"; then \
		echo "agent-clis: claude $(CLAUDE_VERSION) and codex $(CODEX_VERSION) already in $(AGENT_CLIS)"; \
	elif ! command -v npm >/dev/null || ! command -v node >/dev/null; then \
		echo "agent-clis: node/npm not found; the tests that run the real Claude Code and Codex CLIs will be skipped" >&2; \
	elif npm install --loglevel=error --no-audit --no-fund --prefix $(AGENT_CLIS) \
			@anthropic-ai/claude-code@$(CLAUDE_VERSION) @openai/codex@$(CODEX_VERSION); then \
		echo "agent-clis: installed claude $(CLAUDE_VERSION) and codex $(CODEX_VERSION) in $(AGENT_CLIS)"; \
	else \
		echo "agent-clis: npm could not install them (above); the tests that run the real Claude Code and Codex CLIs will be skipped" >&2; \
	fi

# The main job on the repository's own home (dry-run executor, no network, no keys):
# the dashboard, with the loop as its background process (quitting stops the loop).
# `$(BIN)/vigil --home . run` runs the loop alone, without a terminal.
run: $(STAMP)
	$(BIN)/vigil --home . tui --with-loop

# Installs the peers (the `bench` extra) first; BENCH_ARGS="--quick" for a smoke run.
bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
