"""The commands the product prints for an operator to run, each bound to its stack (plain strings).

Dev and prod are two stacks, two state homes and two clusters, and an operator's shell points at one of each at most:
a command that leaves any of them to the shell acts on whichever it points at. So every printed command names them:

- ``kubectl`` and ``helm`` act on the kubeconfig's current context unless told another: ``kubectl --context`` and
  ``helm --kube-context`` name the stack's cluster, ``gke_<project>_<region>_<cluster>`` (``Settings.kube_context``:
  the context ``gcloud container clusters get-credentials`` writes, and the one the program's own kubeconfig names,
  ``infra.k8s.kubeconfig``);
- ``pulumi`` acts on the selected stack of the backend the shell is logged in to, and ``pulumi config set`` offers
  to create a stack it does not find there (pulumi/pulumi ``pkg/cmd/pulumi/config/config.go`` ``newConfigSetCmd``:
  ``RequireStack(..., OfferNew|SetCurrent, ...)``), with a new secrets provider that would replace the stack file's.
  A printed command names its stack with ``--stack`` and the stack's home with ``PULUMI_BACKEND_URL=...`` in front of
  that one command (``$(make -s backend STACK=<stack>)``, the home ``make`` itself uses: docs/state.md "Where the
  state lives"), never exported for the shell; a stack whose home is Pulumi Cloud is named ``<org>/<stack>``;
- a nested key (``tpu-rl:workflow.enabled``, ``tpu-rl:authorizedNetworks[0]``) goes with ``--path``: without it the
  CLI takes the whole name for one flat key (``sdk/go/common/resource/config/key.go`` ``ParseKey``: everything after
  the ``:``), stores ``workflow.enabled: "false"`` beside the ``workflow`` object, and the program refuses the
  unknown key (``core.config.load``), so the setting never takes effect;
- where a make target does the work, the target is printed (``make_target``), with its ``STACK=``: the Makefile's
  default is dev.

tests/test_printed_commands.py scans every message and page for a command none of these built, and loads every
printed ``pulumi config set`` as the CLI would store it.
"""

from __future__ import annotations

import re
import shlex
from typing import Protocol

from core.names import PROJECT

ANY_STACK = "<stack>"
"""The stack of a command printed where no one stack is meant (the policy pack's remediations, a page)."""


class HasContext(Protocol):
    """What names a stack's cluster (``core.settings.Settings``)."""

    @property
    def kube_context(self) -> str: ...


def context_of(cluster: str | HasContext) -> str:
    """The kubeconfig context of the stack's cluster: the settings' ``kube_context``, or the context itself."""
    return cluster if isinstance(cluster, str) else cluster.kube_context


def kubectl(cluster: str | HasContext, *args: str) -> str:
    """``kubectl --context <the stack's context> args...``."""
    return " ".join(("kubectl", "--context", context_of(cluster), *args))


def helm(cluster: str | HasContext, *args: str) -> str:
    """``helm --kube-context <the stack's context> args...``."""
    return " ".join(("helm", "--kube-context", context_of(cluster), *args))


def make_target(target: str, stack: str, *args: str) -> str:
    """``make <target> STACK=<stack> args...``."""
    return " ".join(("make", target, f"STACK={stack}", *args))


def backend(stack: str, url: str = "") -> str:
    """What stands in front of a printed ``pulumi`` command: the stack's home for that command alone, ``url`` when the
    printer knows it, else what ``make backend`` resolves (the home the stack file records, or its default)."""
    return f"PULUMI_BACKEND_URL={url or f'$(make -s backend STACK={stack})'}"


def stack_name(stack: str, organization: str = "") -> str:
    """The name ``--stack`` takes: ``<org>/<stack>`` for a Pulumi Cloud home's organization (a bare name resolves in
    the operator's own default organization: pkg/backend/httpstate/backend.go ``ParseStackReference``)."""
    return f"{organization}/{stack}" if organization else stack


def pulumi_command(stack: str, *args: str, url: str = "", organization: str = "") -> str:
    """``PULUMI_BACKEND_URL=<home> pulumi args... --stack <stack>``."""
    return " ".join((backend(stack, url), "pulumi", *args, "--stack", stack_name(stack, organization)))


def needs_path(key: str) -> bool:
    """Whether ``key`` (``namespace:name``) names a field of an object or an item of a list, which only ``--path``
    sets."""
    return bool(re.search(r"[.\[]", key.partition(":")[2]))


def full_key(key: str) -> str:
    """``key`` with its namespace: the project's when it names none, as the CLI reads it
    (``pkg/cmd/pulumi/config/io.go`` ``parseConfigKey``)."""
    return key if ":" in key.partition(".")[0].partition("[")[0] else f"{PROJECT}:{key}"


def _value(value: str) -> str:
    """A value as typed: a placeholder (``<your CIDR>``) as it is, anything else quoted for the shell where it needs
    it (``shlex.quote`` leaves a bare word, ``STACK`` or ``false``, as it is)."""
    return value if re.fullmatch(r".*<[^<>]+>.*", value) else shlex.quote(value)


def _config(
    verb: str, stack: str, key: str, url: str, organization: str, value: str | None = None, secret: bool = False
) -> str:
    key = full_key(key)
    flags = [*(["--secret"] if secret else []), *(["--path"] if needs_path(key) else [])]
    words = [backend(stack, url), "pulumi", "config", verb, *flags, "--stack", stack_name(stack, organization)]
    words.append(f"'{key}'")
    if value is not None:
        words.append(_value(value))
    return " ".join(words)


def pulumi_config_set(
    stack: str, key: str, value: str | None = None, *, secret: bool = False, url: str = "", organization: str = ""
) -> str:
    """The command that sets ``key`` to ``value`` in ``stack`` (no value: the CLI prompts for it, which keeps a
    secret out of the shell's history), ``--path`` for a nested key: ``PULUMI_BACKEND_URL=$(make -s backend
    STACK=prod) pulumi config set --path --stack prod 'tpu-rl:workflow.enabled' false``."""
    return _config("set", stack, key, url, organization, value, secret)


def pulumi_config_rm(stack: str, key: str, *, url: str = "", organization: str = "") -> str:
    """The command that removes ``key`` from ``stack`` (its default applies again), ``--path`` for a nested key."""
    return _config("rm", stack, key, url, organization)
