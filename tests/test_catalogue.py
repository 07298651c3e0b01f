"""The TPU slice catalogue's arithmetic, for every listed topology."""

from __future__ import annotations

import math

import pytest

from core.machines import machine_shape
from core.tpu import CATALOGUE, SliceShape, chips_in, resolve_slice

pytestmark = pytest.mark.pure


def all_slices() -> list[SliceShape]:
    """Every (version, machine type, topology) the catalogue lists."""
    return [resolve_slice(v.name, m.name, t) for v in CATALOGUE.values() for m in v.machine_types for t in m.topologies]


def test_every_slice_is_listed_once():
    slices = all_slices()
    assert len(slices) == sum(len(m.topologies) for v in CATALOGUE.values() for m in v.machine_types) == 27
    assert len({(s.version, s.machine_type, s.topology) for s in slices}) == len(slices)


@pytest.mark.parametrize("shape", all_slices(), ids=lambda s: f"{s.machine_type}-{s.topology}")
def test_every_topology_has_consistent_arithmetic(shape):
    dims = [int(d) for d in shape.topology.split("x")]
    assert shape.chips == math.prod(dims)
    assert shape.chips % shape.chips_per_vm == 0
    assert shape.hosts == shape.chips // shape.chips_per_vm
    assert shape.multi_host == (shape.hosts > 1)
    assert shape.pool_topology == (shape.topology if shape.hosts > 1 else None)
    assert shape.pathways_instance_type == f"{CATALOGUE[shape.version].pathways_type}:{shape.topology}"
    assert shape.gke_accelerator.startswith("tpu-")


def test_tutorial_slice_is_32_chips_on_8_hosts():
    shape = resolve_slice("v6e", "ct6e-standard-4t", "4x8")
    assert (shape.chips, shape.hosts, shape.multi_host) == (32, 8, True)
    assert shape.gke_accelerator == "tpu-v6e-slice"
    assert shape.pathways_instance_type == "tpuv6e:4x8"


@pytest.mark.parametrize(
    ("machine", "topology", "chips", "hosts"),
    [
        ("ct6e-standard-4t", "2x4", 8, 2),
        ("ct6e-standard-4t", "16x16", 256, 64),
        ("ct6e-standard-8t", "2x4", 8, 1),
        ("ct6e-standard-1t", "1x1", 1, 1),
        ("ct5p-hightpu-4t", "2x2x4", 16, 4),
        ("ct5lp-hightpu-4t", "4x4", 16, 4),
    ],
)
def test_known_shapes(machine, topology, chips, hosts):
    version = next(v for v in CATALOGUE.values() if v.machine(machine))
    shape = resolve_slice(version.name, machine, topology)
    assert (shape.chips, shape.hosts) == (chips, hosts)


def test_a_topology_the_machine_cannot_form_is_refused():
    with pytest.raises(ValueError, match="cannot form"):
        resolve_slice("v6e", "ct6e-standard-8t", "4x8")
    assert chips_in("2x2x4") == 16


@pytest.mark.parametrize(
    ("name", "vcpus", "gib"),
    [("n2-standard-64", 64, 256), ("e2-standard-8", 8, 32), ("n2-highmem-32", 32, 256), ("n1-standard-4", 4, 15)],
)
def test_machine_shapes(name, vcpus, gib):
    shape = machine_shape(name)
    assert shape is not None and (shape.vcpus, shape.memory_gib) == (vcpus, gib)


def test_unknown_machine_shape_is_none():
    assert machine_shape("custom-8-32768") is None
