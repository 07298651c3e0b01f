"""The mutation run's report (``tests/mutation_report.py``): the score per module, and an equivalents list that
cannot rot: an entry without a reason, one naming a mutant that no longer exists, or one the tests now kill, fails
the report."""

from __future__ import annotations

import json

import pytest

from tests import mutation_report

pytestmark = pytest.mark.pure


def _run(tmp_path, monkeypatch, codes: dict[str, int | None], equivalents: str, *args: str) -> int:
    mutants = tmp_path / "mutants"
    (mutants / "pkg").mkdir(parents=True, exist_ok=True)
    (mutants / "pkg" / "x.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    listed = tmp_path / "equivalents.txt"
    listed.write_text(equivalents)
    monkeypatch.setattr(mutation_report, "MUTANTS", mutants)
    monkeypatch.setattr(mutation_report, "EQUIVALENTS", listed)
    return mutation_report.main(list(args))


CODES = {"pkg.x.x_f__mutmut_1": 1, "pkg.x.x_f__mutmut_2": 0, "pkg.x.x_f__mutmut_3": None, "pkg.x.x_f__mutmut_4": 0}


def test_the_score_leaves_out_the_equivalents_and_counts_the_untested(tmp_path, monkeypatch, capsys):
    code = _run(tmp_path, monkeypatch, CODES, "pkg.x.x_f__mutmut_4  # same value\n", "--min", "30")
    out = capsys.readouterr().out
    assert code == 0
    assert "pkg/x.py" in out and " 33.3% " in out  # 1 detected of 3 scored (one equivalent left out)
    assert "survived  pkg.x.x_f__mutmut_2" in out and "no test   pkg.x.x_f__mutmut_3" in out
    assert _run(tmp_path, monkeypatch, CODES, "pkg.x.x_f__mutmut_4  # same value\n", "--min", "34") == 1


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("pkg.x.x_f__mutmut_9  # gone", "stale equivalence entry (no such mutant): pkg.x.x_f__mutmut_9"),
        ("pkg.x.x_f__mutmut_1  # killed", "equivalence entry the tests kill (not equivalent: remove it): pkg.x.x_f"),
    ],
)
def test_an_entry_that_names_no_survivor_fails_the_report(tmp_path, monkeypatch, capsys, entry, said):
    assert _run(tmp_path, monkeypatch, CODES, entry + "\n", "--min", "0") == 1
    assert said in capsys.readouterr().out


def test_an_entry_without_its_reason_is_refused(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="pkg.x.x_f__mutmut_2 has no reason"):
        _run(tmp_path, monkeypatch, CODES, "pkg.x.x_f__mutmut_2\n")


def test_a_mutants_tests_run_fastest_first_and_the_unmeasured_last():
    """The order the mutation run gives a mutant's tests (``tests.conftest.fastest_first``): by their stats-run
    durations, a test the stats did not time last, ties in the order pytest collected them."""
    from types import SimpleNamespace

    from tests.conftest import fastest_first

    items = [SimpleNamespace(nodeid=name) for name in ("slow", "new", "quick", "also-quick")]
    fastest_first(items, {"slow": 9.0, "quick": 0.1, "also-quick": 0.1})  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == ["quick", "also-quick", "slow", "new"]
