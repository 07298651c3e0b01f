# tpu-rl: two set-up commands.
#   make up STACK=dev    provision and run the workflow (`pulumi up`)
#   make test            run the offline test suite
STACK ?= dev
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STATE_DIR := $(CURDIR)/.pulumi-state
POLICY_VENV := policy/venv

.PHONY: up stack preview policy-preview plan destroy refresh test test-slow lint venv dev-venv policy-venv status report mutation readme lock

# The program's environment comes from the hashed lock alone: requirements.lock pins every package
# (transitive ones too) with the sha256 of each wheel and sdist, so pip resolves nothing and refuses a file
# whose hash differs. `make lock` regenerates it from the ranges in requirements.txt. The `venv` link must
# exist before pulumi runs: on a missing (or empty) venv, pulumi creates one itself and pip-installs the
# unhashed requirements.txt into it; a venv/ directory it made that way is refused here, not reused.
$(VENV)/.installed: requirements.lock requirements.txt
	@if [ -e venv ] && [ ! -L venv ]; then echo "error: venv/ is a directory, not the link to $(VENV) (made by pulumi?): remove it and run make again" >&2; exit 1; fi
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements.lock
	ln -sfn $(VENV) venv   # Pulumi.yaml's virtualenv (venv) is this same environment
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

$(VENV)/.installed-slow: $(VENV)/.installed-dev requirements-slow.txt
	$(PY) -m pip install --quiet -r requirements-slow.txt
	touch $@

# The policy pack's own environment: PulumiPolicy.yaml's `virtualenv: venv` resolves inside policy/. Its packages
# come from policy/requirements.lock alone (pinned, hashed; pip refuses a file whose hash differs), as the PR workflow
# installs the base branch's pack; core/ is this checkout's, editable, built with the lock's setuptools, nothing
# fetched. `make lock` regenerates the lock after policy/requirements.txt changes.
$(POLICY_VENV)/.installed: policy/requirements.lock pyproject.toml
	$(PYTHON) -m venv $(POLICY_VENV)
	$(POLICY_VENV)/bin/python -m pip install --quiet --require-hashes --no-deps -r policy/requirements.lock
	$(POLICY_VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation --no-index -e .
	touch $@

venv: $(VENV)/.installed
dev-venv: $(VENV)/.installed-dev
policy-venv: $(POLICY_VENV)/.installed

# Regenerate requirements.lock after editing requirements.txt (and policy/requirements.lock after editing
# policy/requirements.txt). uv (pinned here, in a throwaway venv) makes one
# universal lock, for Linux, macOS and Windows and Python 3.11 on, with the hash of every wheel and sdist; it
# keeps the lock's current pins unless requirements.txt needs others. The lock's header is LOCK_COMMAND
# (tests/test_lockfile.py checks that, and that the lock pins what the venv has installed).
UV_VERSION := 0.13.8
LOCK_COMMAND := uv pip compile --universal --generate-hashes --python-version 3.11 --output-file requirements.lock requirements.txt
# Run in policy/ (requirements.txt's `-e ..` is the checkout); tpu-rl-core is not emitted (no file to hash).
POLICY_LOCK_COMMAND := uv pip compile --universal --generate-hashes --python-version 3.11 --no-emit-package tpu-rl-core --output-file requirements.lock requirements.txt
lock:
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(PYTHON) -m venv "$$tmp/uv" && "$$tmp/uv/bin/python" -m pip install --quiet uv==$(UV_VERSION) && \
	PATH="$$tmp/uv/bin:$$PATH" $(LOCK_COMMAND) && \
	cd policy && PATH="$$tmp/uv/bin:$$PATH" $(POLICY_LOCK_COMMAND)

# Select (or create) the stack on Pulumi Cloud if logged in, else on a local file backend.
define select_stack
	@command -v pulumi >/dev/null || { echo "error: the Pulumi CLI is required (https://www.pulumi.com/docs/install/)" >&2; exit 1; }
	@pulumi whoami >/dev/null 2>&1 || { mkdir -p $(STATE_DIR) && pulumi login file://$(STATE_DIR); }
	@pulumi stack select $(STACK) 2>/dev/null || pulumi stack init $(STACK)
endef

up: $(VENV)/.installed
	$(select_stack)
	pulumi up --stack $(STACK)

# Log in and select (or create) the stack, e.g. before `pulumi config set`.
stack:
	$(select_stack)

preview: $(VENV)/.installed
	$(select_stack)
	pulumi preview --stack $(STACK) --diff

# The same check as the pull-request workflow: preview with the guardrails policy pack.
policy-preview: $(VENV)/.installed $(POLICY_VENV)/.installed
	$(select_stack)
	pulumi preview --stack $(STACK) --diff --policy-pack policy --policy-pack-config policy/config/$(STACK).json

# Destroy and refresh run without the program (--run-program=false, which also beats PULUMI_RUN_PROGRAM): the
# engine would run it as in an `up` (pulumi DestroyV2/RefreshV2), so a running step could make them wait and a
# failed one fail them. A protected stack is refused here; its state guards itself too (docs/operations.md "Destroy").
destroy: $(VENV)/.installed
	$(select_stack)
	@if pulumi config get tpu-rl:protect --stack $(STACK) 2>/dev/null | grep -qix true; then \
		echo "error: stack $(STACK) is protected (tpu-rl:protect: true); to destroy it, run \`pulumi config set tpu-rl:protect false --stack $(STACK)\` and \`make up STACK=$(STACK)\` (it lifts the protection and GKE's deletion protection), then \`make destroy STACK=$(STACK)\` again" >&2; \
		exit 1; \
	fi
	pulumi destroy --stack $(STACK) --run-program=false

refresh: $(VENV)/.installed
	$(select_stack)
	pulumi refresh --stack $(STACK) --run-program=false

plan: $(VENV)/.installed
	$(PY) -m tools.plan --stack $(STACK) --out build/plan-$(STACK)

# Watch the stack's run (`pulumi up` may be waiting on it): make status STACK=dev [WATCH=1]
status: $(VENV)/.installed
	$(PY) -m tools.status --stack $(STACK) $(if $(WATCH),--watch)

# Reward curves, before/after accuracy, config diff and chip-hours of the stack's run: build/report-<stack>/
report: $(VENV)/.installed
	$(PY) -m tools.report --stack $(STACK) --out build/report-$(STACK)

# Style, formatting, the import contracts (imports point one way: docs/architecture.md "Layers and import
# contracts") and the types, as
# pyproject.toml configures them.
lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy

# Rewrite the docs' generated tables from their sources: docs/configuration.md (every key, the refused
# extraArgs keys) and docs/operations.md (what re-runs, the network budgets).
readme: $(VENV)/.installed-dev
	$(PY) -m tests.readme_tables

# Mutation testing of the pure builders and validators (not part of `make test` or CI; docs/testing.md "Mutation testing").
# Incremental: only mutants of changed functions and the last run's survivors are tested again.
# The test-to-function map is rebuilt every time (mutmut 3 maps only new test names, so a new
# function called from an existing test would count as untested).
SHARED ?= $(abspath ../shared)
MUTMUT := TPU_RL_SHARED=$(SHARED) $(VENV)/bin/mutmut run --max-children 2
mutation: $(VENV)/.installed-dev
	rm -f mutants/mutmut-stats.json
	$(MUTMUT)
	$(PY) -m tests.mutation_report --survivors > mutants/survivors.txt
	if [ -s mutants/survivors.txt ]; then $(MUTMUT) $$(cat mutants/survivors.txt); fi
	$(PY) -m tests.mutation_report

# Four workers on two cores: much of the suite waits (loopback servers, bounded waits, bash and Python
# subprocesses), so two workers per core finish about 20 s sooner than one (about 90 s instead of 110).
test: $(VENV)/.installed-dev $(POLICY_VENV)/.installed
	$(MAKE) --no-print-directory lint
	$(PY) -m pytest -q -n 4 --dist loadfile -m "not slow"

# The slow tier, which CI runs after `make test`: the export loaded for real with transformers (torch and
# transformers: ~40 s to install, ~15 s to run).
test-slow: $(VENV)/.installed-slow
	$(PY) -m pytest -q -m slow tests/test_export_loads.py
