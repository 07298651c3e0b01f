"""The example a key's description gives ("such as ...", what docs/configuration.md's generated table shows in its
"allowed" column) is a value the key takes, and a machine type key's example is one of the kind the pool runs: a TPU
VM type from the TPU catalogue for ``tpu.machineType``, a Compute Engine family of the CPU catalogue for the other
pools. Pure: the schema and the catalogues only."""

from __future__ import annotations

import re

import pytest

from core.config.schema import FIELDS
from core.config.values import Text
from core.machines import HYPERDISK_FAMILIES, PD_FAMILIES, machine_family
from core.tpu import CATALOGUE
from tools.docs_tables import configuration_reference

pytestmark = pytest.mark.pure

EXAMPLE = re.compile(r"such as (?P<value>[A-Za-z0-9_.:/@-]*[A-Za-z0-9/])")
"""The first example a description gives (a trailing comma or quote is not part of it)."""
TPU_TYPES = {machine.name for version in CATALOGUE.values() for machine in version.machine_types}
CPU_FAMILIES = set(PD_FAMILIES + HYPERDISK_FAMILIES)
BY_KEY = {field.key: field for field in FIELDS}


def example(field_key: str) -> str:
    """The example the key's reader describes."""
    read = BY_KEY[field_key].read
    assert isinstance(read, Text), field_key
    found = EXAMPLE.search(read.describe())
    assert found, f"{field_key}: {read.describe()!r} gives no example"
    return found["value"]


@pytest.mark.parametrize(
    "field_key",
    [f.key for f in FIELDS if isinstance(f.read, Text) and EXAMPLE.search(f.read.describe())],
)
def test_every_described_example_is_a_value_its_key_takes(field_key):
    read = BY_KEY[field_key].read
    assert isinstance(read, Text) and read.matches(example(field_key))


def test_the_tpu_machine_type_is_described_by_a_tpu_vm_type():
    key = "tpu-rl:tpu.machineType"
    assert example(key) in TPU_TYPES, "a TPU key's example names a TPU VM type of the catalogue"
    row = next(line for line in configuration_reference().splitlines() if line.startswith(f"| `{key}` |"))
    assert f"such as {example(key)} |" in row and "n2-" not in row, row


@pytest.mark.parametrize("field_key", ["tpu-rl:systemPool.machineType", "tpu-rl:cpuPool.machineType"])
def test_a_cpu_pools_machine_type_is_described_by_a_cpu_family(field_key):
    assert example(field_key) not in TPU_TYPES and machine_family(example(field_key)) in CPU_FAMILIES
