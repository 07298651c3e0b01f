# tpu-rl: two set-up commands.
#   make up STACK=dev    provision and run the workflow (`pulumi up`)
#   make test            run the offline test suite
# `make help` lists the others.
STACK ?= dev
# The interpreter every venv is made with: the distribution's CPython 3.11 where it can make a venv with pip (Debian
# builds its own with profile-guided and link-time optimization; pyenv's here, built without either and through a
# shared libpython, runs the fast tier on about a fifth more CPU: docs/testing.md "The interpreter"), else python3.
# PYTHON= chooses another. Probed once, when first used (the assignment inside replaces this definition).
DISTRO_PYTHON := /usr/bin/python3.11
PYTHON ?= $(eval PYTHON := $(if $(shell $(DISTRO_PYTHON) -c 'import ensurepip, venv; ensurepip.version()' 2>/dev/null && echo yes),$(DISTRO_PYTHON),python3))$(PYTHON)
VENV := .venv
PY := $(VENV)/bin/python
POLICY_VENV := policy/venv
# Where the stack's state lives (tools/state.py, docs/state.md "Where the state lives"): the home its stack file
# records (tpu-rl:stateBackend), else STATE_BACKEND, else a bucket of its own, gs://<gcp:project>-pulumi-state-<stack>
# (made by `make state-bucket`), with a Cloud KMS key in a ring of its own (keyRings/pulumi-state-<stack>/cryptoKeys/
# state). Every pulumi command gets it as PULUMI_BACKEND_URL, and a Pulumi Cloud home's organization (tpu-rl:
# stateOrganization, STATE_ORG= for a stack that records none) as PULUMI_DEFAULT_ORGANIZATION; `make` never runs
# `pulumi login`. A PULUMI_BACKEND_URL, STATE_BACKEND or STATE_ORG that disagrees with what is recorded is refused, as
# is a Cloud home without its organization, the project's shared bucket or key of earlier versions (`make
# state-move`), a file backend inside this checkout (unless LOCAL_STATE=1) and a passphrase for a protected stack
# (unless ALLOW_PASSPHRASE=1). SECRETS_PROVIDER is a new stack's secrets provider. MEMBERS= and READERS=
# (comma-separated IAM members) are who `make state-bucket` lets run the stack's commands and its preview.
STATE_BACKEND ?=
STATE_ORG ?=
SECRETS_PROVIDER ?=
LOCAL_STATE ?=
ALLOW_PASSPHRASE ?=
MEMBERS ?=
READERS ?=
FROM ?=
# YES=1: `make up` runs without asking (`--yes --non-interactive`; the deploy workflow). No other flag is passed
# through: the guards the CLI's flags could bypass (--ignore-protect, --target, --exclude, --skip-preview on
# destroy) are never given by these targets (docs/destroy.md "Flags that bypass a guard").
YES ?=
# ACCEPT=maintenance,audit (comma-separated words): `make up` goes on past what it would stop at, with warnings instead:
# a host maintenance of the slice scheduled inside the expected training (docs/maintenance.md "The check in up"), and
# the access audit's findings on a protected stack (docs/audit.md "In make up"). The program reads it as TPU_RL_ACCEPT
# and refuses a word it does not know; `make up` hands it only this variable (an exported TPU_RL_ACCEPT does not
# reach `pulumi up`). FORCE=1: `make maintenance` labels even while a training runs
# or with no maintenance scheduled (a rehearsal).
ACCEPT ?=
FORCE ?=

.PHONY: help up stack preview policy-preview plan destroy refresh unlock state-bucket state-move audit logs test test-slow lint venv dev-venv policy-venv status report rehearse local-cluster local-cluster-down local-cluster-build mutation readme lock maxtext controller iam-types closed-world bytecode-list test-split maintenance

# The targets a user runs, with what they do (`make help`; tests/test_makefile.py keeps it complete).
help:
	@echo "make up STACK=dev            preflight, platform, then convert -> train -> export (pulumi up with the policy"
	@echo "                             pack; YES=1: no prompt; NO_POLICY=1: without the pack; ACCEPT=maintenance: past"
	@echo "                             a slice maintenance scheduled inside the training; ACCEPT=audit: past the access"
	@echo "                             audit's findings, which stop a protected stack's up)"
	@echo "make test                    the offline test suite's fast tier"
	@echo "make state-bucket STACK=dev  the stack's own state bucket, key ring and key, and who may use them (MEMBERS=, READERS=)"
	@echo "make stack STACK=dev         select (or create) the stack and record where its state lives (STATE_BACKEND=,"
	@echo "                             and STATE_ORG= for Pulumi Cloud)"
	@echo "make state-move STACK=dev    move a stack out of a shared bucket, key or key ring into its own (FROM=<url>)"
	@echo "make audit STACK=prod        who outside the stack's own list reaches its state, key, accounts or cluster"
	@echo "                             (MEMBERS=, READERS=: more of its own)"
	@echo "make preview STACK=dev       what up would change (a preview with --diff)"
	@echo "make policy-preview STACK=dev  the preview with the guardrails policy pack (as the PR workflow)"
	@echo "make plan STACK=dev          offline: every resource and manifest, and the cost estimate"
	@echo "make status STACK=dev        each step's state, the step training reached, an ETA (WATCH=1 to follow)"
	@echo "make logs STACK=dev STEP=train  a step's current or last attempt's logs"
	@echo "make maintenance STACK=dev   start the slice's scheduled host maintenance now, before training (FORCE=1: even"
	@echo "                             while training runs, or with none scheduled: a rehearsal)"
	@echo "make rehearse STACK=dev      every step rehearsed on CPU with MaxText and the image's packages, before any TPU"
	@echo "                             is billed (STEP=: one step, on the bucket as the last rehearsal left it)"
	@echo "make local-cluster           a local cluster of real parts on loopback (JobSet, Kueue, kwok nodes): built"
	@echo "                             once from Go modules; KUBECONFIG=build/local-cluster/kubeconfig"
	@echo "make local-cluster-down      stop it; nothing stays running"
	@echo "make local-cluster-build     build its parts and the Pulumi engine's from Go modules, starting nothing"
	@echo "make report STACK=dev        reward curves, accuracy and chip-hours: build/report-<stack>/"
	@echo "make refresh STACK=dev       pulumi refresh, without the program"
	@echo "make destroy STACK=dev       pulumi destroy, without the program; refused while tpu-rl:protect is true"
	@echo "make unlock STACK=dev        clear the lock a killed \`pulumi\` left (refused while it runs here)"
	@echo "make lint                    ruff, the import contracts and mypy"
	@echo "make test-slow               the slow tier (CI runs it after make test)"
	@echo "make readme                  rewrite the docs' generated tables"
	@echo "make lock                    regenerate the hashed locks after editing requirements.txt or pyproject.toml's ranges"
	@echo "make maxtext VERSION=0.2.5   adopt a MaxText release (LOADER=python3.12: its config loader's venv too)"
	@echo "make controller NAME=kueue VERSION=0.17.8  adopt a JobSet or Kueue release (REPO=DIR: a clone holding its tag)"
	@echo "make iam-types               rewrite core/data/gcp-iam-types.json from the installed pulumi_gcp (after its pin moves)"
	@echo "make closed-world            rewrite core/data/closed-world.json from the program's plans (after it creates something new)"
	@echo "make mutation                mutation testing of the pure builders"
	@echo "make bytecode-list           rewrite the modules make test compiles first (after make lock)"
	@echo "make test-split              rewrite the seconds per test file by which make test cuts its two halves"
	@echo ""
	@echo "Every target reports any failure as exit 2 (make's own). The tools' own codes (1 a retry may cure it, 2 bad"
	@echo "input, 70 a fault of tpu-rl's) reach the shell through .venv/bin/tpu-rl, which every target installs:"
	@echo "tpu-rl status|report|logs|audit|maintenance|plan|rehearse --stack dev, and one pulumi command of your own in"
	@echo "the stack's home: tpu-rl pulumi --stack dev -- config set ... (docs/troubleshooting.md#exit-codes)"

# Every environment comes from a hashed lock alone (docs/testing.md "Dependencies"). requirements.lock pins,
# together, every package of the program (requirements.txt, the ranges Pulumi's pip toolchain reads), of the pure
# layer (pyproject.toml [project] dependencies) and of each dependency group of pyproject.toml (dev: the test and
# lint tools and the policy SDK; slow: the slow tier; installer: uv and pip), with the sha256 of every wheel and
# sdist; policy/requirements.lock pins the pack's group alone, at requirements.lock's versions. Each venv installs
# the lock's entries its sources need (tools/lock_subset.py, which follows the lock's `# via` notes: nothing is
# resolved), with --require-hashes --no-deps: the installer refuses a file whose hash the lock does not list.
# The `venv` link must exist before pulumi runs: on a missing (or empty) venv, pulumi creates one itself and
# pip-installs the unhashed requirements.txt into it; a venv/ directory it made that way is refused here, not reused.
# The installer is uv: it installs in a few seconds where pip takes about a minute. uv and pip (Pulumi.yaml's
# `toolchain: pip` lists the venv's packages with it) are the lock's group `installer`, installed by python3's own
# pip into a venv made without one (`python3 -m venv` spends some 8 s compiling the pip it bundles); where python3's
# pip cannot (pip < 22.3 has no `--python`, or python3 has no pip), the venv gets its bundled pip (ensurepip) and
# installs the same entries with it. Nothing is compiled to bytecode at install (all of pulumi_gcp would take ~25 s
# of CPU): Python writes it for what is imported.
UV := $(VENV)/bin/uv
VENV_GUARD = if [ -e venv ] && [ ! -L venv ]; then echo "error: venv/ is a directory, not the link to $(VENV) (made by pulumi?): remove it and run make again" >&2; exit 1; fi
UV_INSTALL = $(UV) pip install --quiet --require-hashes --no-deps
# This checkout, editable, for the console script .venv/bin/tpu-rl (tools/tpu_rl.py): built with the lock's setuptools,
# nothing fetched or resolved; `compat` puts the checkout's root on the venv's path, where tools/ is (a second).
OWN_INSTALL = $(UV) pip install --quiet --python $(PY) --no-deps --no-build-isolation --no-index --config-settings editable_mode=compat -e .
PIP_INSTALL = install --quiet --no-compile --require-hashes --no-deps
# The lock's entries one venv needs, by their sources (tools/lock_subset.py): the program's, then a group's more.
SUBSET = $(PYTHON) tools/lock_subset.py requirements.lock
RUNTIME := requirements.txt pyproject.toml

$(UV): requirements.lock
	@$(VENV_GUARD)
	$(PYTHON) -m venv --without-pip $(VENV)
	$(SUBSET) pyproject.toml:installer > $(VENV)/installer.lock
	$(PYTHON) -m pip --python $(PY) $(PIP_INSTALL) -r $(VENV)/installer.lock 2>/dev/null || \
		{ $(PY) -m ensurepip --default-pip >/dev/null && $(PY) -m pip $(PIP_INSTALL) -r $(VENV)/installer.lock; }
	touch $@

$(VENV)/.installed: $(UV) requirements.lock pyproject.toml
	@$(VENV_GUARD)
	$(SUBSET) $(RUNTIME) > $(VENV)/runtime.lock
	$(UV_INSTALL) --python $(PY) -r $(VENV)/runtime.lock
	$(OWN_INSTALL)
	ln -sfn $(VENV) venv   # Pulumi.yaml's virtualenv (venv) is this same environment
	touch $@

# The test tools: the lock's entries the program and the group `dev` need.
$(VENV)/.installed-dev: $(VENV)/.installed requirements.lock
	$(SUBSET) $(RUNTIME) pyproject.toml:dev > $(VENV)/dev.lock
	$(UV_INSTALL) --python $(PY) -r $(VENV)/dev.lock
	touch $@

# The slow tier's torch and transformers (the group `slow`, on top of dev), hashed like every install. torch is its
# CPU build (2.13.0+cpu; PyPI's Linux torch is a CUDA build of several GB), locked for Linux x86_64 and CPython 3.11,
# where CI runs the slow tier (elsewhere its marker leaves it out and the tests that need it skip). uv finds its
# wheel through TORCH_WHEELS, as `make lock` did: pip's find-links here (PIP_FIND_LINKS, where this machine keeps
# it), else PyTorch's page of torch wheels; either way uv takes only the file whose sha256 the lock lists. Where
# neither has that file (a machine whose find-links folder is empty cannot reach PyTorch's page), the group goes in
# without torch, saying so, and the tests that need torch skip, each naming why (tests/tiny_gemma.py).
TORCH_WHEELS ?= $(or $(PIP_FIND_LINKS),https://download.pytorch.org/whl/torch/)
$(VENV)/.installed-slow: $(VENV)/.installed-dev requirements.lock
	$(SUBSET) $(RUNTIME) pyproject.toml:dev pyproject.toml:slow > $(VENV)/slow.lock
	UV_FIND_LINKS="$(TORCH_WHEELS)" $(UV_INSTALL) --python $(PY) -r $(VENV)/slow.lock 2>$(VENV)/slow.err || { \
		grep -q 'no version of torch' $(VENV)/slow.err || { cat $(VENV)/slow.err >&2; exit 1; }; \
		echo "note: torch 2.13.0+cpu is neither in $(TORCH_WHEELS) nor reachable: the slow tier goes on without it, and its tests that need torch skip"; \
		awk '/^[^ #]/ { skip = ($$0 ~ /^torch==/) } !skip' $(VENV)/slow.lock > $(VENV)/slow.lock.new; \
		mv $(VENV)/slow.lock.new $(VENV)/slow.lock; touch $(VENV)/.slow-without-torch; \
		$(UV_INSTALL) --python $(PY) -r $(VENV)/slow.lock; }
	touch $@

# The policy pack's own environment: PulumiPolicy.yaml's `virtualenv: venv` resolves inside policy/. Its packages
# come from policy/requirements.lock alone (the group `policy`, pinned, hashed; uv refuses a file whose hash
# differs), as the PR workflow installs the base branch's pack with pip; core/ is this checkout's, editable, built
# with the lock's setuptools, nothing fetched.
$(POLICY_VENV)/.installed: $(UV) policy/requirements.lock pyproject.toml
	$(PYTHON) -m venv $(POLICY_VENV)
	$(UV_INSTALL) --python $(POLICY_VENV)/bin/python -r policy/requirements.lock
	$(POLICY_VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation --no-index -e .
	touch $@

venv: $(VENV)/.installed
dev-venv: $(VENV)/.installed-dev
policy-venv: $(POLICY_VENV)/.installed

# Regenerate both locks after editing requirements.txt or pyproject.toml's [project] dependencies or dependency
# groups, with the uv the lock pins (the group `installer`: after changing its pin, run make lock twice,
# the second time with the new uv). uv makes requirements.lock one universal lock, for Linux, macOS and Windows and
# Python 3.11 on (the slow group's torch for where its marker says), with the hash of every wheel and sdist; it keeps
# the lock's current pins unless the ranges need others. policy/requirements.lock is the group `policy` (and the
# project's PyYAML) at requirements.lock's versions, universal too: the PR workflow installs it with Ubuntu 24.04's
# python3 (3.12). uv finds the CPU build of torch through TORCH_WHEELS (UV_FIND_LINKS, which the header leaves out).
# Each lock's header is its command (tests/test_lockfile.py checks that, and that the locks pin what the venv has).
LOCK_COMMAND := uv pip compile --universal --generate-hashes --python-version 3.11 --group dev --group slow --group installer --output-file requirements.lock requirements.txt pyproject.toml
POLICY_LOCK_COMMAND := uv pip compile --universal --generate-hashes --python-version 3.11 --group policy --constraint requirements.lock --output-file policy/requirements.lock pyproject.toml
lock: $(UV)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" UV_FIND_LINKS="$(TORCH_WHEELS)" $(LOCK_COMMAND)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(POLICY_LOCK_COMMAND)

# Adopt a MaxText release (docs/releases.md "Adopting a MaxText release"): download and hash its wheel, regenerate
# the key table, vendor what the tests read; LOADER=python3.12 also builds MaxText's own config loader's venv
# (build/maxtext-<version>/venv), which tests/test_maxtext_pyconfig.py runs on every step's argv.
maxtext: $(VENV)/.installed-dev
	@test -n "$(VERSION)" || { echo "make maxtext VERSION=0.2.5: the MaxText release to adopt"; exit 2; }
	$(PY) -m tools.adopt_maxtext $(VERSION) $(if $(LOADER),--loader $(LOADER))

# Every IAM grant type of the pinned pulumi_gcp, which the policy pack judges (core/iam_types.py).
iam-types: $(VENV)/.installed
	$(PY) -m tools.gcp_iam_types

# Every resource type, kind, role, RBAC subject and image the program creates, which the policy pack allows alone
# (core/closed_world.py).
closed-world: $(VENV)/.installed
	$(PY) -m tools.closed_world

controller: $(VENV)/.installed-dev
	@test -n "$(NAME)" -a -n "$(VERSION)" || { echo "make controller NAME=kueue VERSION=0.17.8: the JobSet or Kueue release to adopt"; exit 2; }
	$(PY) -m tools.adopt_controller $(NAME) $(VERSION) $(if $(REPO),--repo $(REPO)) $(if $(CHART_CHECKED),--chart-checked)

# Each Pulumi target is one shell line, so that what tools/state.py `select` decides (the stack's home; one line and
# exit 2 on a conflict) reaches every pulumi command after it as PULUMI_BACKEND_URL, exported for that line alone.
# `select_stack` then selects the stack; `create_stack` creates it when its home does not hold it, after
# tools/state.py `new` looked for it in every other backend the project knows (exit 2 when one holds it: nothing is
# created), and records the home in the stack file (tools/state.py `record`). $(1): the permissions the target needs
# on the stack's bucket and key (read or write), tested first (tools/state_access.py). A Pulumi Cloud home's
# organization (`select`'s third line) goes to every pulumi command as PULUMI_DEFAULT_ORGANIZATION, which the CLI
# resolves a stack name without one in (pkg/backend/httpstate/backend.go New, ParseStackReference).
STATE_ARGS = --stack '$(STACK)' $(if $(STATE_BACKEND),--backend '$(STATE_BACKEND)') $(if $(STATE_ORG),--organization '$(STATE_ORG)') $(if $(SECRETS_PROVIDER),--secrets-provider '$(SECRETS_PROVIDER)') $(if $(LOCAL_STATE),--local-ok) $(if $(ALLOW_PASSPHRASE),--allow-passphrase)
PULUMI_CLI = command -v pulumi >/dev/null || { echo "error: the Pulumi CLI is required (https://www.pulumi.com/docs/install/)" >&2; exit 1; };
define home
$(PULUMI_CLI) \
	chosen=$$($(PY) -m tools.state select $(STATE_ARGS) --access $(1)) || exit $$?; \
	export PULUMI_BACKEND_URL="$$(printf '%s\n' "$$chosen" | sed -n 1p)"; secrets="$$(printf '%s\n' "$$chosen" | sed -n 2p)"; \
	org="$$(printf '%s\n' "$$chosen" | sed -n 3p)"; if [ -n "$$org" ]; then export PULUMI_DEFAULT_ORGANIZATION="$$org"; fi;
endef
define select_stack
$(call home,$(1)) \
	said=$$(pulumi stack select $(STACK) 2>&1 >/dev/null) || { echo "error: stack $(STACK) is not in its home $$PULUMI_BACKEND_URL ($$(printf '%s' "$$said" | tr '\n' ' ')): make stack STACK=$(STACK) creates it there, or finds where it lives" >&2; exit 1; };
endef
define create_stack
$(call home,write) \
	if ! pulumi stack select $(STACK) 2>/dev/null; then \
		$(PY) -m tools.state new $(STATE_ARGS) || exit $$?; \
		pulumi stack init $(STACK) $${secrets:+--secrets-provider="$$secrets"} || exit $$?; \
	fi; \
	{ grep -q '^ *tpu-rl:stateBackend:' 'Pulumi.$(STACK).yaml' && { [ -z "$$org" ] || grep -q '^ *tpu-rl:stateOrganization:' 'Pulumi.$(STACK).yaml'; }; } || $(PY) -m tools.state record $(STATE_ARGS) || exit $$?;
endef
# A lock a killed `pulumi` left (self-managed backends: pkg/backend/diy/lock.go) is named, with `make unlock`, before
# the CLI meets it; Pulumi Cloud's own conflict message names `pulumi cancel`, which `make unlock` runs too.
check_locks = $(PY) -m tools.state locks $(STATE_ARGS) || exit $$?;

# A protected stack's `up` first runs the access audit (tools/audit.py --before-up; docs/audit.md "In make up"): a
# member outside the stack's own list that reaches its state, key, accounts or cluster stops it here (exit 1), before
# anything changes, unless ACCEPT holds `audit`; an unprotected stack's reads nothing. MEMBERS= and READERS= name more
# of the stack's own (the CI principal that impersonates its deploy account, for one).
AUDIT_ARGS = $(if $(MEMBERS),--members '$(MEMBERS)') $(if $(READERS),--readers '$(READERS)')
audit_before_up = $(PY) -m tools.audit --stack '$(STACK)' --before-up --accept '$(ACCEPT)' $(if $(STATE_BACKEND),--backend '$(STATE_BACKEND)') $(AUDIT_ARGS) || exit $$?;

# Before `pulumi up`, tools/state.py `releases` reads the stack's state (`pulumi stack export`, which takes no lock):
# a release of the program installed in the cluster the state holds but missing from the state (a destroy whose
# cluster delete failed drops it) stops here with the one command that clears it (exit 1), before the engine creates
# anything again; otherwise the releases the state holds go to the program in TPU_RL_RELEASES_IN_STATE (exit 0),
# which checks them again before each release's install (infra/k8s/manifests.py helm_release_problem). A state it
# cannot read (exit 3): one warning, the variable unset, nothing compared (as in a `pulumi up` run by hand).
# The same read hands over the digests the last `up` pinned the images' tags to (TPU_RL_IMAGES_IN_STATE,
# core/images.py recorded_pins): a tag that moved upstream since renames no finished or running step.
# And the Cloud KMS keys the state holds (TPU_RL_KEYS_IN_STATE, core/names.py): a key the state holds is
# the stack's own; a key of its names that another stack uses is never imported. And the version that wrote the state
# and its steps' names (TPU_RL_STEPS_IN_STATE, core/version.py): the program says which steps this `up` runs again.
# `pulumi up` runs with the policy pack (policy/, the stack's policy/config/<stack>.json): a mandatory finding stops
# it before the resource it judges changes. NO_POLICY=1 leaves the pack out (docs/guardrails.md says when).
define with_state
pins=$$(mktemp); keys=$$(mktemp); steps=$$(mktemp); trap 'rm -f "$$pins" "$$keys" "$$steps"' EXIT; \
	releases=$$($(PY) -m tools.state releases --stack $(STACK) --pins "$$pins" --keys "$$keys" --steps "$$steps"); found=$$?; \
	if [ $$found = 0 ]; then export TPU_RL_RELEASES_IN_STATE="$$releases" TPU_RL_IMAGES_IN_STATE="$$(cat "$$pins")" \
		TPU_RL_KEYS_IN_STATE="$$(cat "$$keys")" TPU_RL_STEPS_IN_STATE="$$(cat "$$steps")"; \
	elif [ $$found = 3 ]; then unset TPU_RL_RELEASES_IN_STATE TPU_RL_IMAGES_IN_STATE TPU_RL_KEYS_IN_STATE TPU_RL_STEPS_IN_STATE; \
	else exit $$found; fi;
endef

up: $(VENV)/.installed $(if $(NO_POLICY),,$(POLICY_VENV)/.installed)
	@$(create_stack) \
	$(check_locks) \
	$(audit_before_up) \
	$(with_state) \
	export TPU_RL_ACCEPT='$(ACCEPT)'; \
	pulumi up --stack $(STACK)$(if $(YES), --yes --non-interactive)$(if $(NO_POLICY),, --policy-pack policy --policy-pack-config policy/config/$(STACK).json)

# Select (or create) the stack and record its home, e.g. before your own `pulumi config set`, which runs through
# `tpu-rl pulumi --stack dev -- config set ...` (tools/tpu_rl.py: the same home for that one pulumi, or none run).
stack: $(VENV)/.installed
	@$(create_stack) true

# A preview sees what the next `make up` will do: the same state read hands it the image pins the state holds (without
# them a tag that moved upstream would show renames `make up` does not make). It reads the state and takes no lock.
preview: $(VENV)/.installed
	@$(call select_stack,read) \
	$(with_state) \
	pulumi preview --stack $(STACK) --diff

# The stack's own state bucket (versioned, uniform access, public access prevented) and Cloud KMS key, with the APIs
# they need, and their IAM policies set here: no project convenience member, the caller and MEMBERS= may run the
# stack's commands, READERS= its preview; both policies read back and checked (tools/state_bucket.py). Records the
# home in the stack file. Safe to run again.
state-bucket: $(VENV)/.installed
	$(PY) -m tools.state create $(STATE_ARGS) $(if $(MEMBERS),--members '$(MEMBERS)') $(if $(READERS),--readers '$(READERS)')

# Move a stack from a bucket or key it shares (the project's shared bucket of earlier versions, or FROM=<url>; the
# shared key, or its key in the shared key ring) into its own bucket and a key in a ring of its own, then take the
# state's grants off its old key in the shared ring, saying what it removed and what it left (tools/state_move.py;
# after `make state-bucket`). Run it when no other `pulumi` works on the stack.
state-move: $(VENV)/.installed
	@$(PULUMI_CLI) $(PY) -m tools.state move $(STATE_ARGS) $(if $(FROM),--from '$(FROM)')

# Who, outside the stack's own list (its node and step accounts, the members `make state-bucket` granted its state,
# MEMBERS= and READERS=), can decrypt its state key, read or write its state, set IAM on its project, key rings, keys,
# buckets or accounts, mint its accounts' tokens, or administer its cluster: one line each (tools/audit.py,
# docs/audit.md). Reads IAM policies and roles, and the cluster's RBAC through the stack's kubeconfig; changes nothing.
audit: $(VENV)/.installed
	$(PY) -m tools.audit --stack '$(STACK)' $(if $(STATE_BACKEND),--backend '$(STATE_BACKEND)') $(AUDIT_ARGS)

# Clear the lock a killed `pulumi up` left (a closed laptop, a cancelled CI job): refused while the lock's process
# still runs on this machine; otherwise names each lock, then `pulumi cancel` deletes them (for a self-managed
# backend, every file under the stack's lock folder: pkg/backend/diy/backend.go CancelCurrentUpdate). Run it only
# when no other `pulumi` works on the stack anywhere (docs/state.md "A locked stack").
unlock: $(VENV)/.installed
	@$(call select_stack,write) \
	$(PY) -m tools.state unlock $(STATE_ARGS) || exit $$?; \
	pulumi cancel --stack $(STACK) --yes

# The same check as the pull-request workflow: preview with the guardrails policy pack.
policy-preview: $(VENV)/.installed $(POLICY_VENV)/.installed
	@$(call select_stack,read) \
	$(with_state) \
	pulumi preview --stack $(STACK) --diff --policy-pack policy --policy-pack-config policy/config/$(STACK).json

# Destroy and refresh run without the program (--run-program=false, which also beats PULUMI_RUN_PROGRAM): the
# engine would run it as in an `up` (pulumi DestroyV2/RefreshV2), so a running step could make them wait and a
# failed one fail them. A protected stack is refused here; its state guards itself too (docs/destroy.md "Destroy").
# --continue-on-error=false beats PULUMI_CONTINUE_ON_ERROR, which would delete past a refused delete.
destroy: $(VENV)/.installed
	@$(call select_stack,write) \
	$(check_locks) \
	if pulumi config get tpu-rl:protect --stack $(STACK) 2>/dev/null | grep -qix true; then \
		echo "error: stack $(STACK) is protected (tpu-rl:protect: true); to destroy it, run \`tpu-rl pulumi --stack $(STACK) -- config set 'tpu-rl:protect' false\`, \`tpu-rl pulumi --stack $(STACK) -- config set --path 'tpu-rl:workflow.enabled' false\` and \`make up STACK=$(STACK)\` (it lifts every protection, GKE's deletion protection included, and deletes the steps' objects without running a step), then \`make destroy STACK=$(STACK)\` again" >&2; \
		exit 1; \
	fi; \
	pulumi destroy --stack $(STACK) --run-program=false --continue-on-error=false

refresh: $(VENV)/.installed
	@$(call select_stack,write) \
	$(check_locks) \
	pulumi refresh --stack $(STACK) --run-program=false

plan: $(VENV)/.installed
	$(PY) -m tools.plan --stack $(STACK) --out build/plan-$(STACK)

# Watch the stack's run (`pulumi up` may be waiting on it): make status STACK=dev [WATCH=1]
status: $(VENV)/.installed
	$(PY) -m tools.status --stack $(STACK) $(if $(WATCH),--watch)

# A step's current or last attempt's logs, through the Kubernetes client (bounded, redacted like status):
# make logs STACK=dev STEP=train
STEP ?=
logs: $(VENV)/.installed
	@[ -n "$(STEP)" ] || { echo "error: name the step: make logs STACK=$(STACK) STEP=<convert|train|export|evaluate|publish>" >&2; exit 2; }
	$(PY) -m tools.logs --stack $(STACK) --step $(STEP)

# Start the slice's scheduled host maintenance now, through the Kubernetes client (bounded): labels each slice node
# cloud.google.com/perform-maintenance=true; refused while a training JobSet runs or with no maintenance scheduled,
# unless FORCE=1 (docs/maintenance.md): make maintenance STACK=dev
maintenance: $(VENV)/.installed
	$(PY) -m tools.maintenance --stack $(STACK)$(if $(FORCE), --force)

# Every step of the stack's plan rehearsed on this machine before any TPU is billed (tools/rehearse/rehearsal.py,
# docs/first-run.md "Rehearse first"): the steps' rendered scripts with MaxText's code and the image's package set
# (Python 3.12: PYTHON312= names one) against a Cloud Storage emulator and a loopback Hub; STEP= one step alone;
# SET='key=value ...' overrides the stack file's keys (tools.plan's --set: a step the stack leaves off, say).
PYTHON312 ?=
SET ?=
rehearse: $(VENV)/.installed-dev
	$(PY) -m tools.rehearse --stack $(STACK)$(if $(STEP), --step $(STEP))$(if $(PYTHON312), --python312 '$(PYTHON312)')$(foreach s,$(SET), --set '$(s)')

# The local cluster of real parts on loopback (docs/testing.md "The local cluster"): etcd, the Kubernetes control
# plane, kwok's nodes, JobSet's and Kueue's controllers, each built once from its pinned Go module (needs Go 1.26).
local-cluster: $(VENV)/.installed
	$(PY) -m tools.local_cluster.parts

local-cluster-down: $(VENV)/.installed
	$(PY) -m tools.local_cluster.parts down

# Build (or find in the cache) every part from its Go module without starting anything: the cluster's, and the
# Pulumi CLI's, its Python language host's and the Kubernetes provider's (.ci/run, before the slow tier).
local-cluster-build: $(VENV)/.installed
	$(PY) -m tools.local_cluster.build

# Reward curves, before/after accuracy, config diff and chip-hours of the stack's run: build/report-<stack>/
report: $(VENV)/.installed
	$(PY) -m tools.report --stack $(STACK) --out build/report-$(STACK)

# Style, formatting, the import contracts (imports point one way: docs/architecture.md "Layers and import
# contracts"), the types and the product's dead code (vulture over the product alone, where code only the tests use
# is dead), as pyproject.toml configures them.
lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy
	$(VENV)/bin/vulture

# Rewrite the docs' generated tables from their sources: docs/configuration.md (every key, the refused
# extraArgs keys), docs/upgrades.md (what re-runs) and docs/watching-a-run.md (the
# network budgets).
readme: $(VENV)/.installed-dev
	$(PY) -m tools.docs_tables

# Mutation testing of the pure builders and validators (not part of `make test` or CI; docs/mutation-testing.md).
# Incremental: only mutants of changed functions and the last run's survivors are tested again.
# The test-to-function map is rebuilt every time (mutmut 3 maps only new test names, so a new
# function called from an existing test would count as untested).
SHARED ?= $(abspath ../shared)
MUTMUT := TPU_RL_SHARED=$(SHARED) TPU_RL_TEST_LIMIT=0 $(VENV)/bin/mutmut run --max-children 2
mutation: $(VENV)/.installed-dev
	rm -f mutants/mutmut-stats.json
	$(MUTMUT)
	$(PY) -m tests.mutation_report --survivors > mutants/survivors.txt
	if [ -s mutants/survivors.txt ]; then $(MUTMUT) $$(cat mutants/survivors.txt); fi
	$(PY) -m tests.mutation_report

# The fast tier, the README's command: the install, then every test not marked slow, on the two cores as two
# pytest processes that each run half of the test files (tests/fast_tier.py: cut by each file's recorded seconds,
# tests/data/file-seconds.txt), each half's ten slowest named.
# Lint is its own command (`make lint`; CI runs it first). The budget (docs/testing.md "Timings"): TEST_BUDGET
# seconds for all of it from a fresh clone; a test whose call takes more than TPU_RL_TEST_LIMIT seconds
# (tests/conftest.py) fails, to be made faster or marked slow. Over the budget, make test says so; with
# TEST_BUDGET_STRICT=1 (.ci/run) it fails. The install compiles nothing: tests.warm_bytecode compiles what the tests
# import on both cores first (tests/data/bytecode.txt) and writes pytest's rewritten test modules beside it, and
# PYTHONDONTWRITEBYTECODE is emptied for the tests so that Python writes the bytecode of anything else once instead of
# compiling it in every process.
TEST_BUDGET ?= 90
STARTED := $(shell date +%s)
PYTEST_FAST := -m tests.fast_tier -q -m "not slow" --durations=10 --durations-min=1
test: $(VENV)/.installed-dev
	@date +%s > $(VENV)/.test-installed
	$(PY) -m tests.warm_bytecode
	PYTHONDONTWRITEBYTECODE= $(PY) $(PYTEST_FAST)
	@installed=$$(cat $(VENV)/.test-installed); done=$$(date +%s); \
	total=$$((done - $(STARTED))); \
	echo "make test: $$total s (install $$((installed - $(STARTED))) s, tests $$((done - installed)) s; $$($(PY) -c 'import sys; print("Python", sys.version.split()[0], "of", sys.base_prefix)')); the budget is $(TEST_BUDGET) s from a fresh clone on two cores"; \
	if [ $$total -gt $(TEST_BUDGET) ]; then \
		echo "make test: over the $(TEST_BUDGET) s budget: the slowest tests are named above; make them faster or mark them slow (docs/testing.md \"Timings\")" >&2; \
		if [ -n "$(TEST_BUDGET_STRICT)" ]; then exit 1; fi; \
	fi

# The list of modules `make test` compiles before its workers start (tests/data/bytecode.txt, tests/warm_bytecode.py):
# what a run of the fast tier imports, starting from a venv without bytecode. Run after a lock change.
bytecode-list: $(VENV)/.installed-dev
	find $$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') -name __pycache__ -type d -prune -exec rm -rf {} +
	-PYTHONDONTWRITEBYTECODE= $(PY) $(PYTEST_FAST)
	$(PY) -m tests.warm_bytecode --write

# The seconds each test file took in a run of the fast tier (tests/data/file-seconds.txt), by which `make test` cuts
# the files into its two halves: run after adding or moving much of the suite, when the halves' times printed at the
# end of `make test` drift apart.
test-split: $(VENV)/.installed-dev
	PYTHONDONTWRITEBYTECODE= $(PY) -m tests.fast_tier --record -q -m "not slow"

# The slow tier, which CI runs after `make test` (not the README's command): what does not fit the budget,
# and the export loaded for real with torch and transformers (the group `slow` of pyproject.toml; skipped without them).
test-slow: $(VENV)/.installed-slow $(POLICY_VENV)/.installed
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 4 --dist loadfile -m slow --durations=10 --durations-min=1
