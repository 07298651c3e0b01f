"""The one object through which the program reads the world (``program.world``): what the real run builds from its
environment, and the offline plan's, which reads nothing."""

from __future__ import annotations

import pytest

from core.images import PINS_IN_STATE
from core.names import KEYS_IN_STATE
from core.version import STEPS_IN_STATE
from infra.k8s.live import ClusterReader
from infra.k8s.manifests import RELEASES_IN_STATE
from program.world import OFFLINE, InState, environment_hub, live_world

pytestmark = pytest.mark.pure


def test_the_state_make_up_hands_over_is_read_from_its_four_variables():
    environ = {
        STEPS_IN_STATE: "steps",
        PINS_IN_STATE: "pins",
        RELEASES_IN_STATE: "releases",
        KEYS_IN_STATE: "",
        "OTHER": "x",
    }
    assert InState.of(environ) == InState(steps="steps", pins="pins", releases="releases", keys="")
    assert InState.of({}) == InState(), "nothing handed over: nothing compared"


def test_the_real_world_reads_every_part_and_the_offline_plan_none():
    world = live_world({"HF_ENDPOINT": "http://hub.test", RELEASES_IN_STATE: "jobset"})
    assert world.cluster is ClusterReader
    assert None not in (world.bucket, world.registry, world.capacity, world.hub)
    assert world.hub is not None and world.hub.endpoint == "http://hub.test"
    assert world.state == InState(releases="jobset")
    assert (OFFLINE.hub, OFFLINE.cluster, OFFLINE.bucket, OFFLINE.registry, OFFLINE.capacity) == (None,) * 5
    assert OFFLINE.state == InState()


def test_the_offline_preflight_checks_the_tokens_of_the_environment():
    hub = environment_hub({"HF_TOKEN": "read", "HF_WRITE_TOKEN": "write", "HF_ENDPOINT": "http://hub.test"})
    assert (hub.endpoint, hub.read_token, hub.write_token) == ("http://hub.test", "read", "write")
    assert environment_hub({}) == type(hub)(None, "", ""), "no token given: the preflight says which to export"


def test_the_capacity_check_is_handed_the_keys_the_state_holds():
    """The keys `make up` read of the state reach the capacity check through the world, not the environment: a key the
    state holds is the stack's own (``infra.gcp.capacity.keys``)."""
    from program.stack import _capacity
    from tests.lifecycle_walk import settings

    asked: list[str | None] = []

    def check(settings, *, held_keys=None):
        asked.append(held_keys)
        return []

    assert _capacity(settings("prod", []), check, "projects/p/locations/l/keyRings/r/cryptoKeys/k") == frozenset()
    assert _capacity(settings("prod", []), check, None) == frozenset()
    assert asked == ["projects/p/locations/l/keyRings/r/cryptoKeys/k", None]
