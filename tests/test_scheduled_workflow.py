"""The weekly workflow (.github/workflows/scheduled.yml): every tier with the tests' caches off and in a seeded random
order, and the mutation run with its report published; each command a Makefile target that exists, the order plugin
the one in tests/ (tests/shuffle_plugin.py)."""

from __future__ import annotations

import re
import shlex
from types import SimpleNamespace

import yaml

from tests.frozen import NO_CACHE
from tests.shuffle_plugin import shuffled
from tools.stack_files import ROOT

WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "scheduled.yml").read_text())
MAKEFILE = (ROOT / "Makefile").read_text()


def runs(job: str) -> list[str]:
    return [step["run"] for step in WORKFLOW["jobs"][job]["steps"] if "run" in step]


def make_targets(command: str) -> list[str]:
    words = shlex.split(command.split("|")[0])
    if words[0] == "timeout":
        words = words[2:]
    assert words[0] == "make", command
    return [word for word in words[1:] if "=" not in word and not word.startswith("-") and word != "2>&1"]


def test_it_runs_weekly_and_by_hand_reading_the_repository_only():
    on = WORKFLOW[True]  # YAML 1.1 reads the key `on` as True
    assert set(on) == {"schedule", "workflow_dispatch"}, "never on a pull request: nothing of a branch runs here"
    (cron,) = [entry["cron"] for entry in on["schedule"]]
    minute, hour, day, month, weekday = cron.split()
    assert (day, month) == ("*", "*") and re.fullmatch(r"[0-6]", weekday), "once a week"
    assert 0 <= int(minute) < 60 and 0 <= int(hour) < 24
    assert WORKFLOW["permissions"] == {"contents": "read"}
    assert "${{ secrets." not in (ROOT / ".github" / "workflows" / "scheduled.yml").read_text()


def test_every_tier_runs_with_the_caches_off_in_a_seeded_random_order():
    job = WORKFLOW["jobs"]["shuffled"]
    assert job["env"][NO_CACHE] == "1"
    assert job["env"]["TPU_RL_TEST_LIMIT"] == "0", "the per-test limit is for the cached fast tier"
    assert job["env"]["PYTEST_ADDOPTS"] == "-p tests.shuffle_plugin --shuffle-seed ${{ github.run_id }}", (
        "a new order each run, its seed in the log"
    )
    assert (ROOT / "tests" / "shuffle_plugin.py").exists()
    assert runs("shuffled") == ["make test", "make test-slow"]


def test_the_mutation_run_publishes_its_table_and_survivors():
    assert runs("mutation") == ["timeout 330m make mutation 2>&1 | tee mutation-report.txt"]
    steps = WORKFLOW["jobs"]["mutation"]["steps"]
    run = next(step for step in steps if "run" in step)
    assert run["shell"] == "bash", "bash -eo pipefail: the run fails when make mutation does, not with tee"
    upload = steps[-1]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"] == "always()"
    assert upload["with"]["path"].split() == ["mutation-report.txt", "mutants/survivors.txt"]
    assert "mutants/survivors.txt" in MAKEFILE.split("\nmutation:", 1)[1].split("\n\n", 1)[0]


def test_each_command_is_a_makefile_target():
    targets = set(re.findall(r"^([a-z][\w-]*):", MAKEFILE, flags=re.MULTILINE))
    for job in WORKFLOW["jobs"]:
        for command in runs(job):
            for target in make_targets(command):
                assert target in targets, f"{job}: make {target} is no target of the Makefile"
    for job in WORKFLOW["jobs"].values():
        checkout = job["steps"][0]
        assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["persist-credentials"] is False


def _items(*names: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(nodeid=name) for name in names]


def test_a_seed_gives_one_order_whatever_the_collection_order():
    names = [f"tests/test_{i % 3}.py::test_{i}" for i in range(20)]
    first = [item.nodeid for item in shuffled(_items(*names), 7)]  # type: ignore[arg-type]
    again = [item.nodeid for item in shuffled(_items(*reversed(names)), 7)]  # type: ignore[arg-type]
    other = [item.nodeid for item in shuffled(_items(*names), 8)]  # type: ignore[arg-type]
    assert first == again and sorted(first) == sorted(names)
    assert first != other and first != sorted(names)


def test_the_mutation_run_goes_on_from_the_last_runs_results_and_keeps_its_own_even_when_cut():
    job = WORKFLOW["jobs"]["mutation"]
    steps = job["steps"]
    at = next(i for i, step in enumerate(steps) if "run" in step)
    restore, save = steps[at - 1], steps[at + 1]
    assert restore["uses"].startswith("actions/cache/restore@") and save["uses"].startswith("actions/cache/save@")
    assert restore["uses"].split("@")[1] == save["uses"].split("@")[1], "one release of the cache action"
    assert re.fullmatch(r"[0-9a-f]{40}", restore["uses"].split("@")[1]), "pinned by its commit"
    assert restore["with"]["path"] == save["with"]["path"] == "mutants"
    key = "mutation-${{ github.run_id }}"
    assert restore["with"]["key"] == save["with"]["key"] == key, "a new entry each run (an entry's key is written once)"
    assert key.startswith(restore["with"]["restore-keys"]), "the newest earlier run's entry"
    assert save["if"] == "always()", "a run that failed or was cut keeps what it ran"
    bound = re.fullmatch(r"timeout (\d+)m make .*", steps[at]["run"])
    assert bound and int(bound.group(1)) + 20 <= job["timeout-minutes"], "it stops with time left to save its results"
