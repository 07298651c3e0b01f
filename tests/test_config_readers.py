"""The strict readers one value at a time, with the native YAML types a stack file can hold (the CLI
corpus only sends text): what each accepts, and the exact line for what it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from core.config.values import (
    MAX_SHOWN,
    Boolean,
    ConfigError,
    Duration,
    Hidden,
    Integer,
    Number,
    OneOf,
    Text,
    canonical_cidr,
    format_duration,
    show,
)
from core.printed_commands import pulumi_config_rm, pulumi_config_set
from tests.conftest import slug

pytestmark = pytest.mark.pure

INT, NUM, ABOVE = Integer(1, 10), Number(0, 1), Number(0, 1, exclusive_low=True)
DUR = Duration(60, 3600)
DURATION_TEXT = "a duration such as 90m, 4h or 1h30m, from 1m to 1h"
HUGE = 10**400

# (reader, raw value, the typed value, or the text after "k = " of the error)
CASES: list[tuple[Any, Any, Any]] = [
    (INT, 5, 5),
    (INT, "7", 7),
    (INT, " 7 ", 7),
    (INT, "+3", 3),
    (INT, True, "true is invalid: expected an integer"),
    (INT, 2.0, "2.0 is invalid: expected an integer"),
    (INT, "2.0", '"2.0" is invalid: expected an integer (ASCII digits)'),
    (INT, None, "null is invalid: expected an integer (ASCII digits)"),
    (INT, [1], "[1] is invalid: expected an integer, not a list"),
    (INT, {"a": 1}, '{"a": 1} is invalid: expected an integer, not an object'),
    (INT, 0, "0 is invalid: must be at least 1"),
    (INT, "-0", '"-0" is invalid: must be at least 1'),
    (INT, 10, 10),
    (INT, 11, "11 is invalid: must be at most 10"),
    (NUM, 1, 1.0),
    (NUM, "0.5", 0.5),
    (NUM, ".5", 0.5),
    (NUM, 0, 0.0),
    (NUM, True, "true is invalid: expected a number"),
    (NUM, 2, "2 is invalid: must be at most 1"),
    (NUM, -0.1, "-0.1 is invalid: must be at least 0"),
    (NUM, HUGE, "10000000000000000000000000000000000000000000000000000000... is invalid: expected a finite number"),
    (NUM, -HUGE, "-1000000000000000000000000000000000000000000000000000000... is invalid: expected a finite number"),
    (NUM, "1e400", '"1e400" is invalid: expected a finite number'),
    (NUM, float("inf"), "Infinity is invalid: expected a finite number"),
    (NUM, "nan", '"nan" is invalid: expected a finite number such as 0.5 or 2e-5'),
    (NUM, None, "null is invalid: expected a finite number such as 0.5 or 2e-5"),
    (NUM, [], "[] is invalid: expected a number, not a list"),
    (ABOVE, 1e-9, 1e-9),
    (ABOVE, 0, "0 is invalid: must be above 0"),
    (ABOVE, "0.0", '"0.0" is invalid: must be above 0'),
    (Boolean(), True, True),
    (Boolean(), " FALSE ", False),
    (Boolean(), "True", True),
    (Boolean(), "yes", '"yes" is invalid: expected true or false'),
    (Boolean(), 1, "1 is invalid: expected true or false"),
    (Boolean(), [], "[] is invalid: expected true or false, not a list"),
    (OneOf(("a", "b")), "b", "b"),
    (OneOf(("a", "b")), "A", '"A" is invalid: expected one of a, b'),
    (OneOf(("a", "b")), 1, "1 is invalid: expected one of a, b"),
    (OneOf(("a", "b")), {}, "{} is invalid: expected one of a, b, not an object"),
    (Text(r"[a-z]+[0-9]*", "letters"), "abc1", "abc1"),
    (Text(r"[0-9]+", "digits"), 42, "42"),
    (Text(r"[0-9]+", "digits"), True, "true is invalid: digits"),
    (Text(r"[a-z]+", "letters"), "é", '"\\u00e9" is invalid: letters'),
    (Text(r"[a-z]+", "letters"), "abc\n", '"abc\\n" is invalid: letters'),
    (Text(r"[a-z]+", "letters"), [], "[] is invalid: expected a string, not a list"),
    (Text(r"\d+", "digits"), "\u0664", '"\\u0664" is invalid: digits'),  # ASCII classes only
    (DUR, "1h", 3600),
    (DUR, "1m", 60),
    (DUR, "59m60s", 3600),
    (DUR, "1h0m1s", f'"1h0m1s" is invalid: {DURATION_TEXT}'),
    (DUR, "59s", f'"59s" is invalid: {DURATION_TEXT}'),
    (DUR, 90, f"90 is invalid: {DURATION_TEXT}"),
    (DUR, "", f'"" is invalid: {DURATION_TEXT}'),
    (DUR, ["1h"], '["1h"] is invalid: expected a duration, not a list'),
    (canonical_cidr, "10.0.0.0/8", "10.0.0.0/8"),
    (canonical_cidr, "0.0.0.0/0", "0.0.0.0/0"),
    (canonical_cidr, "10.0.0.1/8", '"10.0.0.1/8" is invalid: host bits are set; the network is 10.0.0.0/8'),
    (canonical_cidr, ["10.0.0.0/8"], '["10.0.0.0/8"] is invalid: expected a CIDR block, not a list'),
]


@pytest.mark.parametrize(("reader", "value", "expected"), CASES, ids=[f"{i}-{slug(c[1])}" for i, c in enumerate(CASES)])
def test_each_reader_accepts_its_type_and_refuses_with_one_line(reader, value, expected):
    accepted = not (isinstance(expected, str) and " is invalid: " in expected)
    if accepted:
        result = reader("k", value)
        assert result == expected and type(result) is type(expected)
    else:
        with pytest.raises(ConfigError) as caught:
            reader("k", value)
        assert str(caught.value) == f"k = {expected}"


SHOWN = [
    (None, "null"),
    ({"b": 1, "a": "é"}, '{"a": "\\u00e9", "b": 1}'),  # sorted keys, ASCII only
    ("x" * (MAX_SHOWN - 2), '"' + "x" * (MAX_SHOWN - 2) + '"'),  # exactly MAX_SHOWN characters
    ("x" * (MAX_SHOWN - 1), '"' + "x" * (MAX_SHOWN - 5) + '..."'),
    (Hidden("a secret"), "(a secret, not shown)"),
    ("hf_" + "a" * 16, "(a value that looks like a Hugging Face token, not shown)"),
    (["ok", "hf_" + "B1" * 10], "(a value that looks like a Hugging Face token, not shown)"),
    ("hf_" + "a" * 15, '"hf_aaaaaaaaaaaaaaa"'),
    (object, "<class 'object'>"),
]


@pytest.mark.parametrize(("value", "shown"), SHOWN, ids=[f"{i}-{slug(v)}" for i, (v, _) in enumerate(SHOWN)])
def test_how_an_error_shows_a_value(value, shown):
    assert show(value) == shown


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (59, "59s"), (60, "1m"), (3600, "1h"), (5400, "1h30m"), (90061, "25h1m1s")]
)
def test_durations_are_written_as_the_engine_reads_them(seconds, text):
    """format_duration and Duration are inverses (the engine reads these as Go durations)."""
    assert format_duration(seconds) == text
    if seconds:
        assert Duration(1, 10**6)("k", text) == seconds


X = "tpu-rl:training.extraArgs"
NO_KEY = "MaxText 0.2.5 has no such key (an unknown rl.* key is ignored silently by MaxText, so it is refused here)"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"eval_interval": 5}, {"eval_interval": "5"}),  # interpreted by the program: typed and bounded
        ({"train_fraction": "1"}, {"train_fraction": "1.0"}),
        ({"train_fraction": 0.25}, {"train_fraction": "0.25"}),
        ({"async_checkpointing": True}, {"async_checkpointing": "true"}),  # bool keys: MaxText's spelling
        ({"async_checkpointing": "False"}, {"async_checkpointing": "false"}),
        ({"rl": {"num_iterations": 2}}, {"rl.num_iterations": "2"}),  # `config set --path` nests rl.*
        ({"eval_steps": "7"}, {"eval_steps": "7"}),
        ({"adam_b1": 1}, {"adam_b1": "1.0"}),
        ({"profiler": True}, {"profiler": "true"}),  # untyped keys keep the YAML type's spelling
        ({"profiler": False}, {"profiler": "false"}),
        ({"profiler": 1.5}, {"profiler": "1.5"}),
        ({"profiler": "xprof"}, {"profiler": "xprof"}),
        ('{"eval_steps": 3, "adam_b1": 0.5}', {"adam_b1": "0.5", "eval_steps": "3"}),  # JSON text; sorted
        ({"eval_steps": 7.0}, f"{X}.eval_steps = 7.0 is invalid: expected an integer"),
        ({"adam_b1": "fast"}, f'{X}.adam_b1 = "fast" is invalid: expected a finite number such as 0.5 or 2e-5'),
        ("[1]", f'{X} = "[1]" is invalid: an object of MaxText key: value pairs'),
        ([1], f"{X} = [1] is invalid: an object of MaxText key: value pairs"),
        ("{bad", f'{X} = "{{bad" is invalid: malformed JSON; expected an object of MaxText key: value pairs'),
        ({"zzzzzzzz": 1}, f"{X}.zzzzzzzz = 1 is invalid: {NO_KEY}"),
        (
            {"rl": {}},
            f"{X}.rl = {{}} is invalid: MaxText 0.2.5 takes an object here; structured values are not supported "
            "in extraArgs",
        ),
        (
            {"logical_axis_rules": "a"},
            f'{X}.logical_axis_rules = "a" is invalid: MaxText 0.2.5 takes a list here; structured values are not '
            "supported in extraArgs",
        ),
        ({"profiler": ["a"]}, f'{X}.profiler = ["a"] is invalid: expected one value, not a list'),
        ({"profiler": {}}, f"{X}.profiler = {{}} is invalid: expected one value, not an object"),
        ({"train_fraction": "0.00001"}, {"train_fraction": "1e-5"}),  # MaxText's shortest spelling
        ({"profiler": 1e16}, f"{X}.profiler = 1e+16 is invalid: must be at most 1000000000000000"),
        ({"steps": {"a": 1}}, f"{X}.steps.a = 1 is invalid: {NO_KEY}"),
        (
            {"eval_interval": None},
            f"{X}.eval_interval = null is invalid: expected a value (remove the key to use MaxText's default)",
        ),
        (
            {"profiler": "a b"},
            f'{X}.profiler = "a b" is invalid: values may use letters, digits and _ . , : / = + @ % * - only '
            "(at most 256)",
        ),
    ],
)
def test_extra_args_are_typed_by_maxtexts_key_table(value, expected):
    from core.config.load import read_extra_args

    if isinstance(expected, dict):
        assert read_extra_args(X, value) == expected
    else:
        with pytest.raises(ConfigError) as caught:
            read_extra_args(X, value)
        assert str(caught.value) == expected


SECRET = {key: pulumi_config_set("prod", key, secret=True) for key in ("tpu-rl:hfToken", "tpu-rl:hfWriteToken")}
"""The commands that set the tokens of the stack these cases load, prod: bound to it (core.printed_commands)."""
SET_TOKEN = f"the token belongs in tpu-rl:hfToken only, set with `{SECRET['tpu-rl:hfToken']}`"
KNOWN = (
    "known keys: clusterName, bucketName, existingCluster, authorizedNetworks, protect, forceDestroy, sharedProject, "
    "bucketVersioning, stateBackend, stateOrganization, access, namespace, hfToken, hfWriteToken, tpu, "
    "systemPool, cpuPool, gke, model, images, training, publish, workflow, kueue"
)
TOKEN = "hf_" + "A" * 30
DELETE = object()


@pytest.mark.parametrize(
    ("changes", "secret", "expected"),
    [
        (
            {"tpu-rl:clusterName": "x"},
            {"tpu-rl:clusterName"},
            "tpu-rl:clusterName is stored as a secret: only tpu-rl:hfToken and tpu-rl:hfWriteToken may be secret (a "
            "secret anywhere else would reach container arguments in plain text); remove it with "
            f"`{pulumi_config_rm('prod', 'tpu-rl:clusterName')}` and set the token with `{SECRET['tpu-rl:hfToken']}`",
        ),
        ({"tpu-rl:fooo": "x"}, {"tpu-rl:fooo"}, f"tpu-rl:fooo = (value, not shown) is invalid: unknown key; {KNOWN}"),
        ({"tpu-rl:zzzzzz": "x"}, set(), f'tpu-rl:zzzzzz = "(set)" is invalid: unknown key; {KNOWN}'),
        (
            {"tpu-rl:buckets": "x"},
            set(),
            f'tpu-rl:buckets = "(set)" is invalid: unknown key; did you mean tpu-rl:bucketName? {KNOWN}',
        ),
        (
            {},
            {"-tpu-rl:hfToken"},
            "tpu-rl:hfToken is stored in plain text: remove it and set it again with "
            f"`{SECRET['tpu-rl:hfToken']}` (the value is not shown)",
        ),
        (
            {"tpu-rl:hfWriteToken": TOKEN, "tpu-rl:publish": {"repo": "acme/gemma4-grpo"}},
            set(),
            "tpu-rl:hfWriteToken is stored in plain text: remove it and set it again with "
            f"`{SECRET['tpu-rl:hfWriteToken']}` (the value is not shown)",
        ),
        (
            {"tpu-rl:hfWriteToken": TOKEN, "tpu-rl:publish": {"repo": "acme/gemma4-grpo"}},
            {"tpu-rl:hfWriteToken"},
            lambda s: s.publish.repo == "acme/gemma4-grpo" and s.publish.private,
        ),
        (
            {"tpu-rl:publish": {"repo": "acme/gemma4-grpo", "private": False}},
            set(),
            "tpu-rl:hfWriteToken = null is invalid: required with tpu-rl:publish.repo; set it with "
            f"`{SECRET['tpu-rl:hfWriteToken']}` (a Hugging Face write token for the repository's namespace, not the "
            "read token)",
        ),
        (
            {"tpu-rl:hfWriteToken": TOKEN},
            {"tpu-rl:hfWriteToken"},
            lambda s: s.publish.repo is None,  # unused: no Secret holds it
        ),
        (
            {"gcp:project": TOKEN},
            set(),
            f"gcp:project holds a value that looks like a Hugging Face token (not shown): {SET_TOKEN}",
        ),
        ({"kubernetes:context": TOKEN}, set(), None),  # another provider's key: not ours to judge
        (
            {"tpu-rl:training": {"extraArgs": {TOKEN: 1}}},
            set(),
            "tpu-rl:training.extraArgs holds a value that looks like a Hugging Face token (not shown): " + SET_TOKEN,
        ),
        (
            {"tpu-rl:authorizedNetworks": ["10.0.0.0/8", TOKEN]},
            set(),
            f"tpu-rl:authorizedNetworks[1] holds a value that looks like a Hugging Face token (not shown): {SET_TOKEN}",
        ),
        (
            {"tpu-rl:tpu": "{" + " " * 200_000 + "}"},
            set(),
            "tpu-rl:tpu = (too long, not shown) is invalid: at most 200000 characters of JSON",
        ),
        ({"tpu-rl:workflow": "{" + " " * (200_000 - 2) + "}"}, set(), None),  # exactly at the limit: defaults
        ({"tpu-rl:workflow": {"timeouts": None, "enabled": False}}, set(), lambda s: s.workflow.enabled is False),
        ({"tpu-rl:workflow": {"timeouts": "", "enabled": False}}, set(), lambda s: s.workflow.enabled is False),
        ({"tpu-rl:gke": DELETE}, set(), lambda s: s.gke.release_channel == "REGULAR"),  # absent: defaults
        (
            {"tpu-rl:clusterName:x": "y"},
            set(),
            f'tpu-rl:clusterName:x = "(set)" is invalid: unknown key; did you mean tpu-rl:clusterName? {KNOWN}',
        ),
        (  # a full-width letter (U+FF43): one line, the key as written and the key it looks like
            {"tpu-rl:\uff43lusterName": "y"},
            set(),
            'tpu-rl:\uff43lusterName = "(set)" is invalid: unknown key; did you mean tpu-rl:clusterName? '
            f"('\uff43' not ASCII) {KNOWN}",
        ),
        (
            {"tpu-rl:hfToken": "", "tpu-rl:workflow": {"enabled": False}},
            {"-tpu-rl:hfToken"},
            lambda s: s.hf_token_set is False,  # an empty plain-text token is no token
        ),
        (
            {"tpu-rl:clusterName": '["' + "a" * (200_000 - 4) + '"]'},
            set(),
            'tpu-rl:clusterName = ["' + "a" * 54 + "... is invalid: expected a string, not a list",
        ),
        ({"tpu-rl:gke": ""}, set(), None),
        (
            {"tpu-rl:tpu": 5},
            set(),
            "tpu-rl:tpu = 5 is invalid: expected an object (set each field by its path: "
            f"`{pulumi_config_set('prod', 'tpu-rl:tpu.<field>', '<value>')}`)",
        ),
        (
            {"tpu-rl:workflow": {"zzzz": 1}},
            set(),
            "tpu-rl:workflow.zzzz = 1 is invalid: unknown field; known fields: capacityCheck, enabled, "
            "jobsetVersion, maxRestarts, preflight, restartDrill, stallTimeout, stepMemoryGib, steps, timeouts, "
            "unschedulableTimeout, verifyExport",
        ),
        (
            {"tpu-rl:workflow": {"timeouts": {"tarin": "1h"}}},
            set(),
            'tpu-rl:workflow.timeouts.tarin = "1h" is invalid: unknown field; did you mean train? known fields: '
            "convert, evaluate, export, publish, train",
        ),
        (
            {"tpu-rl:workflow": {"timeouts": ["1h"]}},
            set(),
            'tpu-rl:workflow.timeouts = ["1h"] is invalid: expected an object',
        ),
        (  # every problem at once: the fields after a malformed object are still read
            {"tpu-rl:workflow": {"timeouts": ["1h"], "zzzz": 1}},
            set(),
            'tpu-rl:workflow.timeouts = ["1h"] is invalid: expected an object\n'
            "tpu-rl:workflow.zzzz = 1 is invalid: unknown field; known fields: capacityCheck, enabled, "
            "jobsetVersion, maxRestarts, preflight, restartDrill, stallTimeout, stepMemoryGib, steps, timeouts, "
            "unschedulableTimeout, verifyExport",
        ),
    ],
)
def test_the_loader_on_raw_stack_values(changes, secret, expected):
    """Values as a stack file holds them (native YAML types, secure keys), straight into the loader."""
    from core.config import load_settings
    from tests.lifecycle_walk import raw

    config, secret_keys = raw("prod", [])
    secret_keys = (secret_keys - {s[1:] for s in secret if s[0] == "-"}) | {s for s in secret if s[0] != "-"}
    config.update(changes)
    for key in [k for k, v in changes.items() if v is DELETE]:
        del config[key]
    if expected is None or callable(expected):
        settings = load_settings(config, "prod", secret_keys)
        assert settings.stack == "prod" and (expected is None or expected(settings))
    else:
        with pytest.raises(ConfigError) as caught:
            load_settings(config, "prod", secret_keys)
        assert str(caught.value) == expected and TOKEN not in str(caught.value)


@pytest.mark.parametrize(
    ("reader", "text"),
    [
        (INT, "integer 1..10"),
        (NUM, "number 0..1"),
        (ABOVE, "number >0..1"),
        (Number(0.5, 2.5), "number 0.5..2.5"),
        (Boolean(), "true or false"),
        (OneOf(("a", "b")), "a | b"),
        (Text("x", "an x"), "an x"),
        (DUR, "duration 1m..1h"),
    ],
    ids=["int", "number", "above", "fraction", "bool", "one-of", "text", "duration"],
)
def test_each_reader_describes_what_it_allows(reader, text):
    assert reader.describe() == text
