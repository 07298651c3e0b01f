"""The output folder of the offline tools: checked before anything is written, written atomically, links
never followed, and only files the tool wrote are ever removed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core.outdir import MARKER, OutputError, prepare, write_files

pytestmark = pytest.mark.pure

FIX = "pick a folder (it is created if missing)"
LINK = "remove it or pick another --out (links in it are never followed)"


def snapshot(folder: Path) -> dict[str, str | bytes]:
    """Every entry under ``folder``: a file's bytes, a link's target, or "dir"."""
    seen: dict[str, str | bytes] = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            seen[name] = "-> " + os.readlink(path)
        elif path.is_dir():
            seen[name] = "dir"
        else:
            seen[name] = path.read_bytes()
    return seen


def plan_files(*manifests: str) -> dict[str, bytes | str]:
    return {"plan.json": '{"resources": []}\n', **{f"manifests/{m}": f"kind: {m}\n" for m in manifests}}


def test_a_missing_folder_is_created_with_its_parents_and_returned_resolved(tmp_path):
    out = tmp_path / "build" / "plan"
    assert prepare(out) == out.resolve()
    assert out.is_dir()


def test_a_symbolic_link_to_a_folder_is_the_users_choice(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "real")
    write_files(tmp_path / "out", plan_files("a.yaml"))
    assert (tmp_path / "real" / "manifests" / "a.yaml").read_text() == "kind: a.yaml\n"


def test_a_file_is_refused(tmp_path):
    out = tmp_path / "plan"
    out.write_text("mine")
    with pytest.raises(OutputError) as err:
        write_files(out, plan_files())
    assert str(err.value) == f"--out {out} is a file, not a folder: {FIX}"
    assert out.read_text() == "mine"


@pytest.mark.parametrize(("out", "root"), [("/dev/null", "/dev"), ("/proc/self", "/proc"), ("/sys/kernel", "/sys")])
def test_system_folders_are_refused(out, root):
    with pytest.raises(OutputError) as err:
        prepare(Path(out))
    assert str(err.value) == f"--out {out} is under {root}, a system folder: pick a folder of your own"


def test_a_fifo_is_refused_without_opening_it(tmp_path):
    out = tmp_path / "pipe"
    os.mkfifo(out)
    with pytest.raises(OutputError) as err:
        prepare(out)
    assert str(err.value) == f"--out {out} is a FIFO (named pipe), not a folder: {FIX}"


def test_a_symbolic_link_to_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("mine")
    out = tmp_path / "out"
    out.symlink_to(tmp_path / "file")
    with pytest.raises(OutputError) as err:
        prepare(out)
    assert str(err.value) == f"--out {out} is a symbolic link to a file, not a folder: {FIX}"


def test_a_symbolic_link_to_nothing_is_refused(tmp_path):
    out = tmp_path / "out"
    out.symlink_to(tmp_path / "gone")
    with pytest.raises(OutputError) as err:
        prepare(out)
    assert str(err.value) == f"--out {out} is a symbolic link to nothing: remove it or pick a folder"
    assert not (tmp_path / "gone").exists()


def test_a_folder_under_a_file_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("mine")
    out = tmp_path / "file" / "plan"
    with pytest.raises(OutputError) as err:
        prepare(out)
    assert str(err.value) == f"--out {out} cannot be created (Not a directory): pick a folder you can write to"


def test_an_unwritable_folder_is_refused(tmp_path):
    out = tmp_path / "locked"
    out.mkdir()
    out.chmod(0o500)
    try:
        if os.access(out, os.W_OK):
            pytest.skip("running as root: a 0500 folder is still writable")
        with pytest.raises(OutputError) as err:
            write_files(out, plan_files())
        assert str(err.value) == f"--out {out} is not writable: pick a folder you can write to"
    finally:
        out.chmod(0o700)


def test_a_planted_link_is_refused_and_its_target_untouched(tmp_path):
    out, target = tmp_path / "out", tmp_path / "precious"
    out.mkdir()
    target.write_text("keep me")
    (out / "plan.json").symlink_to(target)
    with pytest.raises(OutputError) as err:
        write_files(out, plan_files("a.yaml"), owned="manifests")
    assert str(err.value) == f"{out}/plan.json is a symbolic link: {LINK}"
    assert target.read_text() == "keep me"
    assert snapshot(out) == {"plan.json": f"-> {target}"}


def test_a_linked_folder_inside_the_output_is_refused(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "manifests").symlink_to(elsewhere)
    with pytest.raises(OutputError) as err:
        write_files(out, plan_files("a.yaml"), owned="manifests")
    assert str(err.value) == f"{out}/manifests is a symbolic link: {LINK}"
    assert list(elsewhere.iterdir()) == []


def test_a_linked_owned_folder_is_refused_even_when_nothing_is_written_in_it(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifests").symlink_to(tmp_path)
    with pytest.raises(OutputError) as err:
        write_files(out, plan_files(), owned="manifests")
    assert str(err.value) == f"{out}/manifests is a symbolic link: {LINK}"


def test_a_planted_link_as_the_record_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "precious").write_text("keep me")
    (out / MARKER).symlink_to(tmp_path / "precious")
    with pytest.raises(OutputError) as err:
        write_files(out, plan_files())
    assert str(err.value) == f"{out}/{MARKER} is a symbolic link: {LINK}"
    assert (tmp_path / "precious").read_text() == "keep me"


def test_a_folder_where_a_file_goes_and_a_file_where_a_folder_goes_are_refused(tmp_path):
    out = tmp_path / "out"
    (out / "plan.json").mkdir(parents=True)
    with pytest.raises(OutputError) as err:
        write_files(out, plan_files())
    assert str(err.value) == f"{out}/plan.json is a folder, not a file: remove it or pick another --out"
    (out / "plan.json").rmdir()
    (out / "manifests").write_text("mine")
    with pytest.raises(OutputError) as err:
        write_files(out, plan_files("a.yaml"))
    assert str(err.value) == f"{out}/manifests is a file, not a folder: remove it or pick another --out"
    assert (out / "manifests").read_text() == "mine"


@pytest.mark.parametrize("name", ["../escape.yaml", "manifests/../../escape.yaml", "/tmp/abs.yaml", "", "."])
def test_paths_that_leave_the_folder_are_refused(tmp_path, name):
    out = tmp_path / "out"
    with pytest.raises(OutputError) as err:
        write_files(out, {"plan.json": "{}", name: "x"})
    assert str(err.value) == f"cannot write {name!r} in --out {out}: the path must be relative and stay inside it"
    assert not (tmp_path / "escape.yaml").exists()
    assert snapshot(out) == {}


def test_the_record_name_and_a_file_that_is_also_a_folder_are_refused(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(OutputError) as err:
        write_files(out, {MARKER: "{}"})
    assert str(err.value) == f"cannot write {MARKER!r} in --out {out}: the name is tpu-rl's record of its files"
    with pytest.raises(OutputError) as err:
        write_files(out, {"a": "1", "a/b": "2"})
    assert str(err.value) == f"cannot write 'a' in --out {out}: it is also the folder of another file"


def test_nothing_is_written_when_one_destination_is_bad(tmp_path):
    out = tmp_path / "out"
    write_files(out, plan_files("a.yaml", "b.yaml"), owned="manifests")
    (out / "manifests" / "c.yaml").symlink_to(tmp_path / "elsewhere")
    before = snapshot(out)
    new: dict[str, bytes | str] = {"plan.json": "changed", "manifests/a.yaml": "changed", "manifests/c.yaml": "new"}
    with pytest.raises(OutputError) as err:
        write_files(out, new, owned="manifests")
    assert str(err.value) == f"{out}/manifests/c.yaml is a symbolic link: {LINK}"
    assert snapshot(out) == before
    assert not (tmp_path / "elsewhere").exists()


def test_a_users_own_file_in_the_owned_folder_survives(tmp_path):
    out = tmp_path / "out"
    write_files(out, plan_files("a.yaml"), owned="manifests")
    (out / "manifests" / "notes.md").write_text("mine")
    write_files(out, plan_files("b.yaml"), owned="manifests")
    write_files(out, plan_files("b.yaml"), owned="manifests")
    assert (out / "manifests" / "notes.md").read_text() == "mine"
    assert sorted(p.name for p in (out / "manifests").iterdir()) == ["b.yaml", "notes.md"]


def test_files_written_before_and_no_longer_written_are_removed(tmp_path):
    out = tmp_path / "out"
    write_files(out, plan_files("a.yaml", "b.yaml", "c.yaml"), owned="manifests")
    write_files(out, plan_files("b.yaml"), owned="manifests")
    assert sorted(p.name for p in (out / "manifests").iterdir()) == ["b.yaml"]
    record = json.loads((out / MARKER).read_text())["files"]
    assert sorted(record) == ["manifests/b.yaml", "plan.json"]


def test_a_stale_file_the_user_edited_or_replaced_by_a_link_is_kept(tmp_path):
    out = tmp_path / "out"
    write_files(out, plan_files("a.yaml", "b.yaml"), owned="manifests")
    (out / "manifests" / "a.yaml").write_text("edited by hand")
    (tmp_path / "precious").write_text("kind: b.yaml\n")
    (out / "manifests" / "b.yaml").unlink()
    (out / "manifests" / "b.yaml").symlink_to(tmp_path / "precious")
    write_files(out, plan_files(), owned="manifests")
    assert (out / "manifests" / "a.yaml").read_text() == "edited by hand"
    assert (out / "manifests" / "b.yaml").is_symlink()
    assert (tmp_path / "precious").read_text() == "kind: b.yaml\n"
    assert sorted(json.loads((out / MARKER).read_text())["files"]) == ["plan.json"]


def test_a_forged_record_removes_nothing_outside_the_owned_folder(tmp_path):
    out = tmp_path / "out"
    (out / "manifests").mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("x")
    (out / "mine.txt").write_text("x")
    digest = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"  # sha256 of "x"
    forged = {"files": {"../victim.txt": digest, "mine.txt": digest, "manifests/../../victim.txt": digest}}
    (out / MARKER).write_text(json.dumps(forged))
    write_files(out, plan_files(), owned="manifests")
    assert victim.read_text() == "x"
    assert (out / "mine.txt").read_text() == "x"


def test_an_unreadable_record_removes_nothing(tmp_path):
    out = tmp_path / "out"
    write_files(out, plan_files("a.yaml"), owned="manifests")
    (out / MARKER).write_text("not json")
    write_files(out, plan_files(), owned="manifests")
    assert (out / "manifests" / "a.yaml").exists()


def test_files_of_another_tool_in_the_same_folder_stay_recorded(tmp_path):
    out = tmp_path / "out"
    write_files(out, plan_files("a.yaml"), owned="manifests")
    write_files(out, {"report.json": "{}", "report.html": b"<html>"})
    assert sorted(json.loads((out / MARKER).read_text())["files"]) == [
        "manifests/a.yaml",
        "plan.json",
        "report.html",
        "report.json",
    ]
    write_files(out, plan_files(), owned="manifests")
    assert not (out / "manifests" / "a.yaml").exists()
    assert (out / "report.html").read_bytes() == b"<html>"


def test_a_second_run_over_the_same_content_yields_identical_files(tmp_path):
    out = tmp_path / "out"
    write_files(out, plan_files("a.yaml", "b.yaml"), owned="manifests")
    first = snapshot(out)
    write_files(out, plan_files("a.yaml", "b.yaml"), owned="manifests")
    assert snapshot(out) == first
    assert first["plan.json"] == b'{"resources": []}\n'


def test_files_get_the_usual_mode_and_no_temporary_file_is_left(tmp_path):
    out = tmp_path / "out"
    write_files(out, plan_files("a.yaml"), owned="manifests")
    assert sorted(snapshot(out)) == [MARKER, "manifests", "manifests/a.yaml", "plan.json"]
    mask = os.umask(0)
    os.umask(mask)
    assert (out / "plan.json").stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_failed_write_is_one_line_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_files(out, plan_files("a.yaml"), owned="manifests")
    before = snapshot(out)

    def full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OutputError) as err:
        write_files(out, {"plan.json": "changed"})
    assert str(err.value) == f"cannot write {out}/plan.json: No space left on device"
    assert snapshot(out) == before
