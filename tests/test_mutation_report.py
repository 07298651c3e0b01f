"""The mutation run's report (``tests/mutation_report.py``): the score per module, and an equivalents list that
cannot rot: an entry without a reason or the digest of its change, one naming a mutant that no longer exists, one the
tests now kill, or one whose name means another change now (the function's mutants renumbered), fails the report."""

from __future__ import annotations

import json

import pytest

from tests import mutation_report

pytestmark = pytest.mark.pure


SOURCE = """\
def x_f__mutmut_orig(a):
    return a + 1
def x_f__mutmut_1(a):
    return a - 1
def x_f__mutmut_2(a):
    return a + 2
def x_f__mutmut_3(a):
    return a * 1
def x_f__mutmut_4(a):
    return a + 1 if a else a + 1
"""
"""mutmut's copy of ``pkg/x.py``: ``f``'s original and its four mutants."""


def _run(tmp_path, monkeypatch, codes: dict[str, int | None], equivalents: str, *args: str) -> int:
    mutants = tmp_path / "mutants"
    (mutants / "pkg").mkdir(parents=True, exist_ok=True)
    (mutants / "pkg" / "x.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    (mutants / "pkg" / "x.py").write_text(SOURCE)
    listed = tmp_path / "equivalents.txt"
    listed.write_text(equivalents)
    monkeypatch.setattr(mutation_report, "MUTANTS", mutants)
    monkeypatch.setattr(mutation_report, "EQUIVALENTS", listed)
    return mutation_report.main(list(args))


CODES = {"pkg.x.x_f__mutmut_1": 1, "pkg.x.x_f__mutmut_2": 0, "pkg.x.x_f__mutmut_3": None, "pkg.x.x_f__mutmut_4": 0}
FOUR = "pkg.x.x_f__mutmut_4 @{}  # same value\n"
"""The entry of mutant 4 with the digest ``{}`` of its change."""


def digest(tmp_path, monkeypatch, name: str) -> str:
    _run(tmp_path, monkeypatch, CODES, "")
    return mutation_report.change_digest(name, tmp_path / "mutants")


def test_the_score_leaves_out_the_equivalents_and_counts_the_untested(tmp_path, monkeypatch, capsys):
    entry = FOUR.format(digest(tmp_path, monkeypatch, "pkg.x.x_f__mutmut_4"))
    capsys.readouterr()
    code = _run(tmp_path, monkeypatch, CODES, entry, "--min", "30")
    out = capsys.readouterr().out
    assert code == 0
    assert "pkg/x.py" in out and " 33.3% " in out  # 1 detected of 3 scored (one equivalent left out)
    assert "survived  pkg.x.x_f__mutmut_2" in out and "no test   pkg.x.x_f__mutmut_3" in out
    assert _run(tmp_path, monkeypatch, CODES, entry, "--min", "34") == 1


@pytest.mark.parametrize(
    ("code", "score"),
    [(-9, "100.0%         2"), (-11, " 50.0%         1")],
    ids=["killed-after-the-cpu-limit", "segfault"],
)
def test_a_mutant_killed_after_the_cpu_limit_is_detected_and_a_crash_is_not(tmp_path, monkeypatch, capsys, code, score):
    """mutmut's runner sends SIGKILL one second after a SIGXCPU the tests did not end on (a mutant that loops): -9 is
    detected, as a timeout is; a segmentation fault (-11) is not, and counts against the score."""
    codes = {"pkg.x.x_f__mutmut_1": code, "pkg.x.x_f__mutmut_2": 1}
    _run(tmp_path, monkeypatch, codes, "")
    assert score in capsys.readouterr().out


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("pkg.x.x_f__mutmut_9 @00000000  # gone", "stale equivalence entry (no such mutant): pkg.x.x_f__mutmut_9"),
        (
            "pkg.x.x_f__mutmut_1 @00000000  # killed",
            "equivalence entry the tests kill (not equivalent: remove it): pkg.x.x_f",
        ),
        (
            "pkg.x.x_f__mutmut_2 @00000000  # written for another change",
            "equivalence entry whose mutant is another change now (renumbered: find it with --diff): "
            "pkg.x.x_f__mutmut_2",
        ),
    ],
)
def test_an_entry_that_names_no_survivor_fails_the_report(tmp_path, monkeypatch, capsys, entry, said):
    assert _run(tmp_path, monkeypatch, CODES, entry + "\n", "--min", "0") == 1
    assert said in capsys.readouterr().out


def test_an_entry_without_its_reason_or_digest_is_refused(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="pkg.x.x_f__mutmut_2 has no reason"):
        _run(tmp_path, monkeypatch, CODES, "pkg.x.x_f__mutmut_2 @00000000\n")
    with pytest.raises(SystemExit, match="pkg.x.x_f__mutmut_2 has no @digest of its change"):
        _run(tmp_path, monkeypatch, CODES, "pkg.x.x_f__mutmut_2  # same\n")


def test_a_digest_is_of_the_change_and_printed_for_an_entry(tmp_path, monkeypatch, capsys):
    """The digest is of the lines a mutant changes: two mutants' differ, and ``--digest`` prints the entry's head."""
    two, four = (digest(tmp_path, monkeypatch, f"pkg.x.x_f__mutmut_{n}") for n in (2, 4))
    assert len(two) == 8 and two != four
    capsys.readouterr()
    assert _run(tmp_path, monkeypatch, CODES, "", "--digest", "pkg.x.x_f__mutmut_2") == 0
    assert capsys.readouterr().out == f"pkg.x.x_f__mutmut_2 @{two}\n"


def test_a_mutants_tests_run_fastest_first_and_the_unmeasured_last():
    """The order the mutation run gives a mutant's tests (``tests.conftest.fastest_first``): by their stats-run
    durations, a test the stats did not time last, ties in the order pytest collected them."""
    from types import SimpleNamespace

    from tests.conftest import fastest_first

    items = [SimpleNamespace(nodeid=name) for name in ("slow", "new", "quick", "also-quick")]
    fastest_first(items, {"slow": 9.0, "quick": 0.1, "also-quick": 0.1})  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == ["quick", "also-quick", "slow", "new"]
