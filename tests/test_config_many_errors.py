"""Every problem of a stack's config in one run: a stack file in the CLI's format with several
independent errors is refused with all of them, one line each, by the loader, by `make status` and `make report`
(exit 2), and by the program as one ``pulumi.RunError`` (what `pulumi up` shows: the Python language host logs a
``RunError``'s text as one error, pulumi ``sdk/python/cmd/pulumi-language-python-exec``, ``except
pulumi.RunError as e: pulumi.log.error(str(e))``)."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest

from core.config import ConfigError, load_settings
from tools import report as report_cli
from tools import status as status_cli
from tools.stack_files import load_stack, load_stack_config

FIXTURE = Path(__file__).parent / "data" / "stacks" / "Pulumi.many-errors.yaml"
"""The passphrase fixture (tests/data/stacks, the CLI's format) with ten independent mistakes."""
KNOWN_KEYS = (
    "clusterName, bucketName, authorizedNetworks, protect, forceDestroy, sharedProject, bucketVersioning, "
    "stateBackend, stateOrganization, access, namespace, hfToken, hfWriteToken, tpu, systemPool, cpuPool, gke, "
    "model, images, training, publish, workflow, kueue"
)
EXPECTED = [
    f'tpu-rl:protec = "(set)" is invalid: unknown key; did you mean tpu-rl:protect? known keys: {KNOWN_KEYS}',
    'tpu-rl:clusterName = "Tpu_RL" is invalid: a lowercase letter first, then lowercase letters, digits or hyphens, '
    "at most 20 characters, no trailing hyphen",
    'tpu-rl:authorizedNetworks[0] = "34.120.1.7/24" is invalid: host bits are set; the network is 34.120.1.0/24',
    'tpu-rl:forceDestroy = "yes" is invalid: expected true or false',
    "tpu-rl:training.extraArgs.eval_intervall = 5 is invalid: did you mean eval_interval? MaxText 0.2.5 has no such "
    "key (an unknown rl.* key is ignored silently by MaxText, so it is refused here)",
    'tpu-rl:workflow.timeouts.train = "6 hours" is invalid: a duration such as 90m, 4h or 1h30m, from 1m to 168h',
    'gcp:zone = "us-central1-b" is invalid: must be a zone of gcp:region us-east5 (e.g. us-east5-b)',
    'tpu-rl:tpu.topology = "3x3" is invalid: valid topologies of ct6e-standard-4t are 2x4, 4x4, 4x8, 8x8, 8x16, 16x16',
    "tpu-rl:cpuPool.maxNodes = 1 is invalid: must be at least minNodes (3)",
    "tpu-rl:training.trainMicroBatchSize = 3 is invalid: must divide batchSize (4)",
    'tpu-rl:kueue.queue = "team-queue" is invalid: names a LocalQueue managed elsewhere, but tpu-rl:kueue.enabled is '
    "true (tpu-rl installs its own queue, tpu-rl); set tpu-rl:kueue.enabled false to use team-queue, or remove "
    "tpu-rl:kueue.queue",
]


@pytest.mark.pure
def test_the_loader_reports_every_problem_one_line_each():
    with pytest.raises(ConfigError) as caught:
        load_stack(None, FIXTURE)
    assert list(caught.value.problems) == EXPECTED
    assert str(caught.value) == "\n".join(EXPECTED)


@pytest.mark.pure
def test_each_problem_is_the_line_it_gets_alone():
    """Each line is the message the same mistake gets on its own (the messages the other tests pin): fixing all but
    one leaves exactly that one."""
    config, secret_keys, _ = load_stack_config(FIXTURE)
    good = {
        "gcp:zone": "us-east5-b",
        "tpu-rl:clusterName": "tpu-rl-dev",
        "tpu-rl:forceDestroy": "true",
        "tpu-rl:tpu": '{"topology": "2x4", "capacity": "spot"}',
        "tpu-rl:cpuPool": "{}",
        "tpu-rl:training": '{"numBatches": 10, "iciExpertParallelism": 1, "extraArgs": {"eval_interval": 5}}',
        "tpu-rl:authorizedNetworks": '["34.120.1.0/24"]',
        "tpu-rl:kueue": "{}",
        "tpu-rl:workflow": '{"timeouts": {"train": "6h"}}',
    }
    fixed = {k: v for k, v in config.items() if k != "tpu-rl:protec"} | good
    assert load_settings(fixed, "many-errors", frozenset(secret_keys)).cluster_name == "tpu-rl-dev"
    seen: list[str] = []
    for key in ("tpu-rl:protec", *good):
        with pytest.raises(ConfigError) as caught:
            load_settings({**fixed, key: config[key]}, "many-errors", frozenset(secret_keys))
        seen += caught.value.problems
    assert sorted(seen) == sorted(EXPECTED)


@pytest.mark.pure
def test_a_rule_that_needs_an_invalid_value_is_skipped_not_reported_twice():
    """An invalid capacity is one line: the reservation rule, the restarts default and the Kueue timeouts that need
    it are skipped."""
    config, secret_keys, _ = load_stack_config(FIXTURE.parent / "Pulumi.passphrase.yaml")
    config["tpu-rl:tpu"] = '{"topology": "2x4", "capacity": "spot-ish", "reservation": "mine"}'
    with pytest.raises(ConfigError) as caught:
        load_settings(config, "passphrase", frozenset(secret_keys))
    assert caught.value.problems == (
        'tpu-rl:tpu.capacity = "spot-ish" is invalid: expected one of reservation, spot, flex-start, on-demand',
    )


@pytest.mark.parametrize("tool", ["status", "report"])
def test_status_and_report_exit_2_with_every_problem(tool, tmp_path, capsys):
    if tool == "status":
        code = status_cli.main(["--config-file", str(FIXTURE)])
    else:
        code = report_cli.main(["--config-file", str(FIXTURE), "--out", str(tmp_path / "report")])
        assert not (tmp_path / "report").exists()
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.splitlines() == [f"error: {line}" for line in EXPECTED]


@pytest.mark.program
def test_pulumi_up_stops_with_one_run_error_holding_every_problem():
    """The program (under Pulumi's mock runtime, as `make plan` runs it) raises one ``RunError`` before anything is
    registered."""
    from tools.plan.cli import plan_stack

    with pytest.raises(pulumi.RunError) as caught:
        plan_stack(FIXTURE)
    assert str(caught.value).splitlines() == EXPECTED


@pytest.mark.pure
def test_an_invalid_knob_skips_only_the_rules_that_read_it():
    """A learning rate that is not a number does not hide a micro-batch size that does not divide the batch."""
    config, secret_keys, _ = load_stack_config(FIXTURE.parent / "Pulumi.passphrase.yaml")
    config["tpu-rl:training"] = '{"learningRate": "fast", "trainMicroBatchSize": 3, "iciExpertParallelism": 1}'
    with pytest.raises(ConfigError) as caught:
        load_settings(config, "passphrase", frozenset(secret_keys))
    assert caught.value.problems == (
        'tpu-rl:training.learningRate = "fast" is invalid: expected a finite number such as 0.5 or 2e-5',
        "tpu-rl:training.trainMicroBatchSize = 3 is invalid: must divide batchSize (4)",
    )
