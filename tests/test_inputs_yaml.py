"""``core.inputs.parse_yaml`` on libyaml's parser reads what PyYAML's pure-Python parser reads: the same values from
the project's own YAML (Pulumi.yaml, every example stack file) and from documents that lean on YAML 1.1's corners,
and a refusal of the same documents (only the wording of a parser's own complaint differs)."""

from __future__ import annotations

import pytest
import yaml

from core import inputs
from core.inputs import InputError, parse_yaml
from tools.stack_files import ROOT

pytestmark = pytest.mark.pure


class _Pure(yaml.SafeLoader):
    """The pure-Python parser under ``core.inputs``' resolvers and constructors."""


_Pure.yaml_implicit_resolvers = inputs._SafeLoader.yaml_implicit_resolvers
_Pure.yaml_constructors = inputs._SafeLoader.yaml_constructors

STACKS = ROOT / "tests" / "data" / "stacks"
FILES = sorted([ROOT / "Pulumi.yaml", *ROOT.glob("Pulumi.*.yaml"), *STACKS.rglob("*.yaml")])
DOCUMENTS = [  # YAML 1.1's booleans and numbers, times as text, quoting and blocks, keys, markers, nothing
    "a: yes\nb: no\nc: on\nd: ~\ne: 0x1f\nf: 0o17\ng: 017\nh: 1_000\ni: .inf\nj: -.nan\n",
    "t: 2001-12-14\nu: 2001-12-14t21:59:43.10-05:00\nv: 12:30:00\n",
    "k: 'single ''quoted'''\nl: \"double \\u00e9 \\t\"\nm: |\n  literal\n  block\nn: >-\n  folded\n  text\n",
    "? complex\n: value\nlist: [1, 2, {x: y}]\nempty: {}\nnone:\n",
    "key with spaces: value # a comment\n'quoted: key': 1\n\"é\": ü\n",
    "--- \nconfig:\n  tpu-rl:x:\n    secure: v1:abc\n...\n",
    "",
    "# only a comment\n",
]
REFUSED = [
    "config: [unclosed\n",
    "a: b: c\n",
    "a:\n\t- x\n",
    "a: !!binary aGVsbG8=\n",
    "a: !!set {x}\n",
    "x: &a [1]\ny: *a\n",
    "k: \x07\n",
    "[" * 65 + "]" * 65,
    "a: 1\n---\nb: 2\n",
    "n: " + "9" * 5000 + "\n",
]


def read(text: str, monkeypatch: pytest.MonkeyPatch, parser: type[yaml.SafeLoader]) -> object:
    """``parse_yaml(text)`` with ``parser``: the value, or the refusal up to the parser's own words."""
    monkeypatch.setattr(inputs, "_SafeLoader", parser)
    try:
        return parse_yaml(text, "doc")
    except InputError as err:
        return ("refused", str(err).split(": ", 1)[0])


def test_the_parser_is_libyamls_where_pyyaml_has_it():
    assert yaml.__with_libyaml__ and issubclass(inputs._SafeLoader, yaml.CSafeLoader)


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(ROOT).as_posix() for p in FILES])
def test_the_projects_yaml_reads_the_same(path, monkeypatch):
    value = read(path.read_text(), monkeypatch, inputs._SafeLoader)
    assert isinstance(value, dict) and value == read(path.read_text(), monkeypatch, _Pure)


@pytest.mark.parametrize("text", DOCUMENTS, ids=[f"document-{i}" for i, _ in enumerate(DOCUMENTS)])
def test_yaml_11s_corners_read_the_same(text, monkeypatch):
    value = read(text, monkeypatch, inputs._SafeLoader)
    assert not (isinstance(value, tuple) and value[0] == "refused")
    assert value == read(text, monkeypatch, _Pure)


@pytest.mark.parametrize("text", REFUSED, ids=[f"refused-{i}" for i, _ in enumerate(REFUSED)])
def test_what_one_parser_refuses_the_other_refuses_at_the_same_place(text, monkeypatch):
    refused = read(text, monkeypatch, inputs._SafeLoader)
    assert isinstance(refused, tuple) and refused[0] == "refused"
    assert refused == read(text, monkeypatch, _Pure)
