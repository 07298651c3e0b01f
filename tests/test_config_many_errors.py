"""Every problem of a stack's config in one run: a stack file in the CLI's format with several
independent errors is refused with all of them, one line each, by the loader, by `make status` and `make report`
(exit 2), and by the program as one ``pulumi.RunError`` (what `pulumi up` shows: the Python language host logs a
``RunError``'s text as one error, pulumi ``sdk/python/cmd/pulumi-language-python-exec``, ``except
pulumi.RunError as e: pulumi.log.error(str(e))``)."""

from __future__ import annotations

import os

import pulumi
import pytest

from core.config import ConfigError, load_settings
from tests.config_boundaries import MANY_ERRORS as FIXTURE
from tests.config_boundaries import many_errors_message, read_messages
from tools import report as report_cli
from tools import status as status_cli
from tools.stack_files import load_stack_config

EXPECTED = read_messages().get("many-errors", "").split("\n")
"""Its problems, one line each, as reviewed in tests/data/config-messages.tsv (`TPU_RL_UPDATE_MESSAGES=1 make
test` rewrites the row ``many-errors``)."""


@pytest.mark.pure
def test_the_loader_reports_every_problem_one_line_each():
    lines = many_errors_message().split("\n")
    assert len(set(lines)) == len(lines) > 1, "several problems, one line each, each once"
    if not os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        assert lines == EXPECTED


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
