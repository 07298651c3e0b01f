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
  A printed command runs through ``tpu-rl pulumi --stack <stack> -- <pulumi arguments>`` (``tools/tpu_rl.py``), which
  gives that one pulumi process the stack's home (the one ``make`` uses: docs/state.md "Where the state lives") and
  ``--stack``, or refuses and runs no pulumi when the home cannot be decided. Never ``PULUMI_BACKEND_URL=$(...)
  pulumi``: a substitution that fails leaves the variable empty, and pulumi goes to the operator's own login, which
  may hold another stack of the same name. A home given as a URL (``url``: where a stack lived before a move) is
  written in front of the command, never empty;
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


def stack_name(stack: str, organization: str = "") -> str:
    """The name ``--stack`` takes: ``<org>/<stack>`` for a Pulumi Cloud home's organization (a bare name resolves in
    the operator's own default organization: pkg/backend/httpstate/backend.go ``ParseStackReference``)."""
    return f"{organization}/{stack}" if organization else stack


def pulumi_command(stack: str, *args: str, url: str = "", organization: str = "") -> str:
    """``tpu-rl pulumi --stack <stack> -- args...``: pulumi in the stack's home, or no pulumi at all. With ``url`` (a
    home other than the one the stack file names now): ``PULUMI_BACKEND_URL=<url> pulumi args... --stack <stack>``
    (``<org>/<stack>`` for a Pulumi Cloud ``organization``)."""
    if url:
        return " ".join((f"PULUMI_BACKEND_URL={url}", "pulumi", *args, "--stack", stack_name(stack, organization)))
    return " ".join(("tpu-rl", "pulumi", "--stack", stack, "--", *args))


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


def _config(verb: str, stack: str, key: str, value: str | None = None, secret: bool = False) -> str:
    key = full_key(key)
    flags = [*(["--secret"] if secret else []), *(["--path"] if needs_path(key) else [])]
    words = ["config", verb, *flags, f"'{key}'", *([] if value is None else [_value(value)])]
    return pulumi_command(stack, *words)


def pulumi_config_set(stack: str, key: str, value: str | None = None, *, secret: bool = False) -> str:
    """The command that sets ``key`` to ``value`` in ``stack`` (no value: the CLI prompts for it, which keeps a
    secret out of the shell's history), ``--path`` for a nested key: ``tpu-rl pulumi --stack prod -- config set
    --path 'tpu-rl:workflow.enabled' false``."""
    return _config("set", stack, key, value, secret)


def pulumi_config_rm(stack: str, key: str) -> str:
    """The command that removes ``key`` from ``stack`` (its default applies again), ``--path`` for a nested key."""
    return _config("rm", stack, key)
