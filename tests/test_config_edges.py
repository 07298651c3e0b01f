"""Edges of the config readers that a message or a value depends on: encrypted secrets offline, the
detail of a malformed value, long keys, a machine Kueue cannot size, and the evaluation's limits the configuration
checks, which are its program's. Pure."""

from __future__ import annotations

import json
import shlex

import pytest

from core.config.lists import read_networks
from core.config.load import load_settings, read_fields
from core.config.values import OPAQUE_SECRET, ConfigError, error
from core.redact import scrub
from core.steps import EVALUATE_MAX_MARKER, EVALUATE_MAX_NEW_TOKENS, template_tokens
from tests.lifecycle_walk import raw, settings
from workloads.container import evaluate_export
from workloads.container.evaluate_export import RefusedError, parse_spec
from workloads.container.evaluate_grader import extract_answer
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

TOKEN = "tpu-rl:hfToken"


def prod(**values):
    """The prod stack's raw config with ``values`` in place (full key -> value), and its secret keys."""
    config, secret = raw("prod", [])
    return {**config, **values}, secret | {TOKEN}


def test_an_encrypted_secret_counts_as_set_without_being_read():
    """Offline the tools never decrypt: the placeholder of an encrypted value is not a token to check."""
    assert read_fields(*prod(**{TOKEN: OPAQUE_SECRET}))["hfTokenSet"] is True


def test_a_decrypted_secret_is_read_like_any_value():
    assert read_fields(*prod(**{TOKEN: "hf_" + "a" * 30}))["hfTokenSet"] is True
    with pytest.raises(ConfigError, match="is invalid: a Hugging Face read token"):
        read_fields(*prod(**{TOKEN: "hf_ with spaces"}))


def test_the_placeholder_text_in_a_plain_key_is_read_as_text():
    """Only a secret key's placeholder is skipped: the same text in a plain key is an invalid value."""
    with pytest.raises(ConfigError, match="^tpu-rl:namespace = "):
        read_fields(*prod(**{"tpu-rl:namespace": OPAQUE_SECRET}))


def test_a_value_nested_too_deep_says_so():
    deep = '{"a":' + "[" * 200 + "]" * 200 + "}"
    with pytest.raises(ConfigError) as err:
        settings("prod", [f"tpu-rl:training.extraArgs={deep}"])
    assert str(err.value).endswith(
        "is invalid: malformed JSON (nested deeper than 64 levels); expected an object of MaxText key: value pairs"
    )


def test_a_long_key_is_shown_cut_to_120_characters():
    key = "tpu-rl:" + "k" * 200
    message = str(error(key, 1, "no such key"))
    assert message == f"{scrub(key, limit=120)} = 1 is invalid: no such key"
    assert message.split(" = ")[0] != scrub(key, limit=121)


def test_a_machine_kueue_cannot_size_is_refused_with_the_fix():
    with pytest.raises(ConfigError) as err:
        settings("prod", ["tpu-rl:cpuPool.machineType=n2-custom-64-262144"])
    assert str(err.value) == (
        'tpu-rl:cpuPool.machineType = "n2-custom-64-262144" is invalid: has no known size, and Kueue\'s cpu and '
        "memory quota is the pool's size; use a predefined machine type such as n4-standard-64, or set "
        "tpu-rl:kueue.enabled false"
    )


# -- the evaluation's limits: what the configuration refuses is what the evaluation's program would refuse at run time,
# after the conversion and the whole training (docs/configuration.md "Combinations refused because they cannot finish")

EVALUATE = "tpu-rl:workflow.steps.evaluate=true"
X = "tpu-rl:training.extraArgs"


def evaluation_spec(overrides: list[str]) -> dict:
    """The spec the planned evaluation step hands its program (the last word of its ``exec python3`` line)."""
    step = plan_workflow(settings("prod", [EVALUATE, *overrides]))["evaluate"]
    command = step.script
    return json.loads(shlex.split(command[command.index("exec python3 /tpu-rl/evaluate_export.py ") :])[-1])


def test_the_configurations_evaluation_limits_are_the_programs():
    assert (EVALUATE_MAX_NEW_TOKENS, EVALUATE_MAX_MARKER) == (
        evaluate_export.MAX_NEW_TOKENS,
        evaluate_export.MAX_MARKER,
    )


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        [f"{X}.solution_start_token=ANSWER", f"{X}.solution_end_token=END"],
        [f"{X}.solution_end_token=END", f"{X}.reasoning_start_token=THINK"],
    ],
)
def test_the_evaluation_is_graded_with_the_markers_the_configuration_checks(overrides):
    tokens = template_tokens(settings("prod", [EVALUATE, *overrides]).training.extra_args)
    spec = evaluation_spec(overrides)
    assert (spec["answerStart"], spec["answerEnd"]) == (tokens["solution_start"], tokens["solution_end"])
    assert f"between {tokens['reasoning_start']} and {tokens['reasoning_end']}" in spec["system"]


def test_the_last_spec_the_configuration_accepts_is_one_the_program_runs_and_the_next_it_refuses():
    """At each boundary the planned spec passes the program's own check (``parse_spec``), and the same spec one step
    further, which the configuration refuses, fails it (or finds no answer): the refusal comes before any cost."""
    longest = evaluation_spec(["tpu-rl:training.maxTargetLength=4352"])
    assert parse_spec(json.dumps(longest)).max_new_tokens == 4096
    with pytest.raises(RefusedError, match="maxNewTokens"):
        parse_spec(json.dumps({**longest, "maxNewTokens": longest["maxNewTokens"] + 1}))

    marked = evaluation_spec([f"{X}.solution_start_token=" + "s" * 100, f"{X}.solution_end_token=" + "e" * 100])
    assert parse_spec(json.dumps(marked)).answer_end == "e" * 100
    with pytest.raises(RefusedError, match="answerEnd is 101 characters"):
        parse_spec(json.dumps({**marked, "answerEnd": "e" * 101}))

    near = evaluation_spec([f"{X}.solution_start_token=answer:"])
    assert extract_answer(f"<reasoning>9 + 9</reasoning>answer: 18 {near['answerEnd']}", "answer:", "</answer>") == "18"
    with pytest.raises(RefusedError, match="the same marker"):
        parse_spec(json.dumps({**near, "answerEnd": near["answerStart"]}))
    # A start marker inside the end marker: MaxText's pattern (start, shortest text, end) finds the answer all the same.
    assert extract_answer("answer 18 </answer>", "answer", "</answer>") == "18"
    assert extract_answer("answer 18 </answer> answer 18 </answer>", "answer", "</answer>") == "18"


def test_the_prod_example_pins_a_gke_version_its_kueue_is_tested_on():
    """Pulumi.prod.yaml pins the control plane (``tpu-rl:gke.versionPrefix``) inside the Kubernetes versions the
    Kueue it installs is tested on (core/config/cluster_rules.py ``KUEUE_KUBERNETES``, from Kueue's
    Makefile-test.mk), past the GKE that labels a TPU node with its scheduled maintenance."""
    from core.config.cluster_rules import KUEUE_KUBERNETES, MAINTENANCE_LABEL_MIN_GKE, _version_tuple

    prefix = settings("prod", []).gke.version_prefix
    assert prefix is not None
    pinned = _version_tuple(prefix)
    oldest, newest = (_version_tuple(v) for v in KUEUE_KUBERNETES)
    assert settings("prod", []).kueue.install and oldest <= pinned[:2] <= newest
    assert pinned > _version_tuple(MAINTENANCE_LABEL_MIN_GKE)[: len(pinned)]


@pytest.mark.parametrize(
    ("prefix", "kueue", "refused"),
    [
        ("1.33.", True, False),
        ("1.32.", True, True),
        ("1.32.", False, False),  # no Kueue of the stack's: the maintenance label's minimum only
        ("1.31.", False, False),  # the channel's newest 1.31 is past 1.31.1-gke.2008000
        ("1.31.0", False, True),
        ("1.36.", True, False),  # newer than Kueue's tested versions is not refused
    ],
)
def test_the_gke_version_minimum(prefix, kueue, refused):
    overrides = [f"tpu-rl:gke.versionPrefix={prefix}", f"tpu-rl:kueue.enabled={str(kueue).lower()}"]
    if not refused:
        assert settings("prod", overrides).gke.version_prefix == prefix
        return
    with pytest.raises(ConfigError, match=r"^tpu-rl:gke\.versionPrefix = "):
        settings("prod", overrides)


def test_every_unreadable_network_is_named_not_only_the_first():
    """All of a list's errors at once: a CIDR that cannot be read does not stop the items after it being checked."""
    shape = (
        "is invalid: an IPv4 CIDR block a.b.c.d/n such as 203.0.113.0/24 "
        "(prefix 0-32, no leading zeros, host bits zero)"
    )
    with pytest.raises(ConfigError) as caught:
        settings("dev", ['tpu-rl:authorizedNetworks=["bad", "10.0.0.0/8", "worse"]'])
    assert str(caught.value).splitlines() == [
        f'tpu-rl:authorizedNetworks[0] = "bad" {shape}',
        f'tpu-rl:authorizedNetworks[2] = "worse" {shape}',
    ]


def test_an_unreadable_network_does_not_stop_the_duplicates_after_it_being_named():
    with pytest.raises(ConfigError) as raised:
        read_networks("k", ["office", "10.0.0.0/8", "10.0.0.0/8"])
    assert [line.split(" is invalid: ")[0] for line in str(raised.value).splitlines()] == [
        'k[0] = "office"',
        'k[2] = "10.0.0.0/8"',
    ]
    assert str(raised.value).endswith("duplicate of k[1]")


@pytest.mark.parametrize("key", ["tpu-rl:hfToken", "tpu-rl:hfWriteToken"])
@pytest.mark.parametrize(
    "value", ["my secret value", "x" * 600, '{"a": 1}', "[1, 2]"], ids=["space", "long", "object", "list"]
)
def test_a_secret_that_is_no_token_is_refused_without_its_value(key, value):
    """A token pasted with a space, cut and pasted twice, or JSON: refused, and the line never shows what was stored,
    though it looks like no Hugging Face token."""
    config, secret_keys = raw("prod", ["tpu-rl:publish.repo=acme/model"])
    config[key] = value
    with pytest.raises(ConfigError) as raised:
        load_settings(config, "prod", secret_keys | {key})
    (line,) = [line for line in str(raised.value).splitlines() if line.startswith(key)]
    assert (
        line == f"{key} = (value, not shown) is invalid: a Hugging Face {'write' if 'Write' in key else 'read'} token"
    )
    assert value[:12] not in str(raised.value)


def test_a_key_stored_as_a_secret_is_one_line_and_its_value_never_read():
    """Only the tokens may be secret: another key stored as one is refused by its storage alone; its value (here one
    the key refuses) is never read, so no second line and nothing of it shown."""
    config, secret_keys = raw("dev", [])
    config["tpu-rl:clusterName"] = "NOT VALID"
    with pytest.raises(ConfigError) as raised:
        load_settings(config, "dev", secret_keys | {"tpu-rl:clusterName"})
    (line,) = str(raised.value).splitlines()
    assert line.startswith("tpu-rl:clusterName is stored as a secret: only tpu-rl:hfToken and tpu-rl:hfWriteToken")


def test_a_token_stored_in_plain_text_is_one_line_and_its_value_never_read():
    """A token written without --secret is refused by its storage alone: whatever it holds (here JSON, which the
    token's reader would refuse too) is never read, so there is no second line."""
    config, secret_keys = raw("dev", [], token='{"a": 1}')
    with pytest.raises(ConfigError) as raised:
        load_settings(config, "dev", secret_keys - {"tpu-rl:hfToken"})
    (line,) = str(raised.value).splitlines()
    assert line.startswith("tpu-rl:hfToken is stored in plain text: remove it and set it again with")
