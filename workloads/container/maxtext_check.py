"""Check, before a step loads any weight, that the image's MaxText is the release the project adopted (run in the
image as ``python3 /tpu-rl/maxtext_check.py``, a file of the step's ConfigMap beside ``shown.py``, which it imports;
standard library only).

tpu-rl's checks of MaxText (its config loader on every step's argv, its converters' flags, the log lines the program
parses, its RL evaluation) run on the released wheel that ``make maxtext`` adopted (``tools/adopt_maxtext.py``); the
image is named by a tag that no public source ties to that release, and ``up`` pins the tag to whatever digest the
registry gives it. So every step that runs MaxText (the conversion, training, the export) runs this program first:
it finds the MaxText package ``python3 -m maxtext...`` imports in the step's image and compares its files with the
``maxtext/`` lines of the adopted wheel's ``RECORD`` (path, sha256, size: PEP 376/427), inlined below by
``workloads/specs/commands.py`` from ``core/data/maxtext-<version>-record.json`` as base64 of its JSON: the same bytes
wherever the plan is made (the step's identity hashes them; compression would depend on the zlib build), and no line
naming a MaxText module, which the policy pack would take for a run of the trainer it cannot read
(``core.step_config.TRAINER_MENTIONS``).

The images MaxText publishes copy the wheel's ``maxtext/`` folder to ``/deps/src/maxtext`` and put ``/deps/src`` on
``PYTHONPATH`` (MaxText's ``build_and_push_docker_image.yml``: the wheel installed into a venv, ``PACKAGE_DIR`` its
``site-packages``; ``maxtext_tpu_dependencies.Dockerfile``: ``COPY ${PACKAGE_DIR}/maxtext/ src/maxtext/``; read at
MaxText ``e591f30``, ten commits past ``maxtext-v0.2.4``, the newest source this project could read), so the
package is found the way Python finds it, wherever an image keeps it: the import system's finders
(``sys.meta_path``, an editable install's among them) asked in their order, the path's with the working directory
first, as ``python3 -m`` puts it (``sys.path`` itself is left as it is). Every file of the RECORD must be there with
its size and sha256; files the RECORD does not list are not compared: an image's build may leave its own there
(MaxText's ``install_post_train_extra_deps.py`` builds the vLLM adapter from ``integration/vllm``; Python writes
``__pycache__``), and MaxText reads a file by its name, which the RECORD lists.

The line names the image's own MaxText version as its installed metadata gives it (``importlib.metadata``: the
``.dist-info`` the image's installer wrote), else its package's ``version.py`` (``__version__``, which the wheel
holds), and a way out that fits: another release's files, to adopt that release or use an image of the adopted one;
the adopted release's version with other files (an image rebuilt from other sources under the same tag, the official
one included), to pin an image whose files are the wheel's; and in every case ``tpu-rl:images.maxtextCheck: warn``,
which runs the image as it is.

Usage: ``python3 maxtext_check.py IMAGE [refuse|warn]`` (the image reference the step's manifest names, shown in the
message; ``tpu-rl:images.maxtextCheck``, refuse when not given). Exit 0 with one line on stdout when every file
matches. Otherwise one line on stderr naming the files that differ, the image's version and what to do, and exit 3
(``core.names.SETUP_FAILURE_EXIT``): the step fails at once, and a training JobSet fails rather than restarts (the
Pathways head's pod failure policy counts only exits 75 and 76 as disruptions); with ``warn``, the same line as a
warning and exit 0: the step goes on with the image's MaxText. The step's script runs it before anything else, so no
weight is read from an image whose MaxText the checks never saw unless the configuration says so.
"""

import base64
import csv
import hashlib
import importlib.machinery
import importlib.metadata
import json
import os
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from workloads.container import shown
else:  # python3 /tpu-rl/maxtext_check.py: shown.py is a file of the same ConfigMap, its folder on sys.path
    import shown

MISMATCH = 3
"""Exit code of a refusal (``core.names.SETUP_FAILURE_EXIT``): the same image fails the same way on every retry."""
SHOWN = 5
"""Files named per kind of difference; the rest are counted."""
CHUNK = 1 << 20
PACKAGE = "maxtext"
MODES = ("refuse", "warn")
"""``tpu-rl:images.maxtextCheck``: stop the step on a difference, or say it and go on."""
VERSION_LINE = re.compile(r"""^__version__\s*=\s*["']([^"']{1,40})["']""", re.M)

# tpu-rl: the adopted MaxText's RECORD is inlined here (workloads/specs/commands.py)
PINNED = ""
# tpu-rl: end of the adopted MaxText's RECORD


def pinned(text):
    """The inlined pin: base64 of the JSON of ``core/data/maxtext-<version>-record.json`` (line breaks ignored)."""
    return json.loads(base64.b64decode(text))


def rows(lines):
    """``(path, sha256 as urlsafe base64 without padding, size)`` of each RECORD line under ``maxtext/``."""
    found = []
    for row in csv.reader(lines):
        path, digest, size = row
        if not path.startswith(PACKAGE + "/") or not digest.startswith("sha256="):
            raise ValueError(f"the pinned RECORD line {path!r} is not a maxtext/ file with its sha256")
        found.append((path, digest.removeprefix("sha256="), int(size)))
    return found


def package_spec():
    """The spec of the ``maxtext`` ``python3 -m maxtext...`` imports from the working directory (None: none): each
    finder of ``sys.meta_path`` in turn, as the import system asks them; the path's finder searches the working
    directory where ``python3 FILE`` put this file's folder (neither, with ``-P``)."""
    path = sys.path if sys.flags.safe_path else [os.getcwd(), *sys.path[1:]]
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)  # None: a legacy finder, which Python 3.12 no longer asks
        if find_spec is None:
            continue
        spec = find_spec(PACKAGE, path if finder is importlib.machinery.PathFinder else None)
        if spec is not None:
            return spec
    return None


def package_dir():
    """The folder of the ``maxtext`` package ``python3 -m maxtext...`` imports from the working directory (None:
    none)."""
    spec = package_spec()
    if spec is None:
        return None
    if spec.origin and spec.origin.endswith("__init__.py"):
        return os.path.dirname(spec.origin)
    locations = list(spec.submodule_search_locations or ())
    return locations[0] if len(locations) == 1 else None


def file_digest(path):
    """The file's sha256 as RECORD writes it, and its size."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as file:
        while block := file.read(CHUNK):
            digest.update(block)
            size += len(block)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode(), size


def differences(root, expected):
    """The RECORD's files under ``root`` (the package's parent folder) that are missing, and those whose size or
    sha256 differs (or that cannot be read)."""
    missing, changed = [], []
    for path, digest, size in expected:
        local = os.path.join(root, *path.split("/"))
        if not os.path.isfile(local):
            missing.append(path)
            continue
        try:
            found = file_digest(local)
        except OSError:
            found = None
        if found != (digest, size):
            changed.append(path)
    return missing, changed


def _named(kind, paths):
    shown = ", ".join(path.removeprefix(PACKAGE + "/") for path in paths[:SHOWN])
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return f"{kind}: {shown}{more}"


def image_version(folder):
    """The MaxText version the image says it holds: its installed metadata, else ``version.py`` in the package's
    ``folder`` (None: neither, or ``folder`` is None)."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        with open(os.path.join(folder, "version.py"), encoding="utf-8") as file:
            found = VERSION_LINE.search(file.read(1 << 16))
    except (OSError, TypeError, UnicodeDecodeError):
        return None
    return found[1] if found else None


def way_out(version, own):
    """What to do about an image whose MaxText (``own``, None: unknown) is not the adopted ``version``'s files."""
    warn = "or set tpu-rl:images.maxtextCheck warn to run the image's MaxText unchecked"
    adopting = 'docs/releases.md "Adopting a MaxText release"'
    if own == version:
        return f"set tpu-rl:images.maxtext to an image (a digest) whose MaxText files are the wheel's, {warn}"
    if own is None:
        return f"set tpu-rl:images.maxtext to the tpu_post_training image of MaxText {version}, {warn}"
    return (
        f"adopt MaxText {own} (make maxtext VERSION={own}, {adopting}), set tpu-rl:images.maxtext to the "
        f"tpu_post_training image of MaxText {version}, {warn}"
    )


def _not_the_wheel(image, pin, own):
    """The start of a refusal: what the image holds against the wheel the checks ran."""
    version, wheel = pin["version"], f"{pin['wheel']}, sha256 {pin['sha256'][:12]}"
    if own == version:
        return f"the image {image} says it holds MaxText {own}, but not the files of the wheel the checks ran ({wheel})"
    if own:
        return f"the image {image} holds MaxText {own}, not the {version} the checks ran ({wheel})"
    return f"the image {image} does not hold the MaxText {version} the checks ran ({wheel}; it names no version)"


def check(image, pin):
    """(exit code, the one line) of the image's MaxText against ``pin``."""
    version = pin["version"]
    expected = rows(pin["record"])
    folder = package_dir()
    own = image_version(folder)
    if folder is None:
        return MISMATCH, (
            f"tpu-rl: the image {image} has no MaxText package (python3 finds no single folder of {PACKAGE} from "
            f"{os.getcwd()}): {way_out(version, own)}"
        )
    missing, changed = differences(os.path.dirname(folder), expected)
    if not missing and not changed:
        return 0, f"tpu-rl: MaxText {version} checked: the {len(expected)} files of its wheel's RECORD in {folder}"
    kinds = "; ".join(_named(kind, paths) for kind, paths in (("changed", changed), ("missing", missing)) if paths)
    return MISMATCH, (
        f"tpu-rl: {_not_the_wheel(image, pin, own)}: {len(missing) + len(changed)} of the {len(expected)} files of its "
        f"RECORD differ in {folder} ({kinds}): {way_out(version, own)}"
    )


def main(argv):
    if len(argv) not in (2, 3) or argv[2:] not in ([], *([mode] for mode in MODES)):
        print(f"usage: maxtext_check.py IMAGE [{'|'.join(MODES)}]", file=sys.stderr)
        return MISMATCH
    try:
        code, line = check(argv[1], pinned(PINNED))
    except Exception as err:  # one line, never a traceback: the step stops before any weight is read
        code, line = MISMATCH, f"tpu-rl: cannot check the image's MaxText ({type(err).__name__}: {shown.line(err)})"
    line = shown.line(line, None)  # it names the image's own version and folder
    if code and argv[2:] == ["warn"]:
        warned = line.replace("tpu-rl: ", "tpu-rl: warning: ", 1)
        print(f"{warned}; going on (tpu-rl:images.maxtextCheck warn)", file=sys.stderr)
        return 0
    print(line, file=sys.stderr if code else sys.stdout)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
