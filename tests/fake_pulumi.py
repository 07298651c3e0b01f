"""A `pulumi` for the Makefile's tests, and a checkout to run `make` in.

``checkout(tmp_path)`` makes a copy of the repository's Makefile, Pulumi.yaml, example stack files and ``tools/`` (so
that ``tools.stack_files.ROOT``, and with it every stack file the tools read or write, is the copy's), with the rest
linked; ``install(folder)`` puts this module on PATH as ``pulumi``. It keeps stacks the way the diy backend does
(pulumi/pulumi ``pkg/backend/diy/store.go``: the checkpoint at ``.pulumi/stacks/tpu-rl/<stack>.json`` under the
``PULUMI_BACKEND_URL`` it is given: a folder for ``file://``, fake-gcs-server for ``gs://`` through
``STORAGE_EMULATOR_HOST``), Pulumi Cloud's in ``$FAKE_CLOUD`` (one folder per URL), and writes a new stack's
``secretsprovider`` and ``encryptedkey`` into its stack file as ``pulumi stack init --secrets-provider`` does. Every
call is logged as a JSON line ``{"argv": [...], "backend": <PULUMI_BACKEND_URL or null>, "organization":
<PULUMI_DEFAULT_ORGANIZATION or null>}`` to ``$PULUMI_LOG``."""

from __future__ import annotations

# At the top only what the fake CLI needs: every call of it is a process that imports this module.
import json
import os
import sys
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

ROOT = Path(__file__).resolve().parents[1]
LINKED: tuple[str, ...] = (
    "core",
    "infra",
    "workloads",
    "program",
    "policy",
    "__main__.py",
    "requirements.lock",
    "requirements.txt",
)
LINKED += ("pyproject.toml", ".venv")
COPIED = ("Makefile", "Pulumi.yaml", "Pulumi.dev.yaml", "Pulumi.prod.yaml")
# The environment a user may have; the tests set what they need.
CLEAN: tuple[str, ...] = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PULUMI_BACKEND_URL", "STATE_BACKEND", "LOCAL_STATE")
CLEAN += ("YES", "PULUMI_ACCESS_TOKEN", "SECRETS_PROVIDER", "BUCKET", "STEP", "TPU_RL_RELEASES_IN_STATE", "NO_POLICY")
CLEAN += ("TPU_RL_IMAGES_IN_STATE", "ALLOW_PASSPHRASE", "MEMBERS", "READERS", "FROM", "PULUMI_CONFIG_PASSPHRASE")
CLEAN += ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "TPU_RL_KEYS_IN_STATE")
ENCRYPTED_KEY = "CiQAiRhdlQ7ogTYJFm9rET0XjWwP05Af8jmhoJXyD5OVZQz5OAsSSQCO2yJKaySKHpJOj9CuLhqUkqMwXxiMthCQD540f66IbcZQ="
"""What ``pulumi stack init --secrets-provider gcpkms://...`` writes as ``encryptedkey`` (a wrapped data key; the
shape of tests/data/stacks/Pulumi.gcpkms.yaml's)."""


def checkout(tmp_path: Path) -> Path:
    """A checkout of the repository under ``tmp_path`` whose stack files and tools are its own."""
    import shutil

    folder = tmp_path / "checkout"
    folder.mkdir()
    for name in COPIED:
        shutil.copy2(ROOT / name, folder / name)
    shutil.copytree(ROOT / "tools", folder / "tools")  # with its bytecode: each tool run here compiles nothing
    for name in LINKED:
        (folder / name).symlink_to(ROOT / name)
    return folder


def install(folder: Path) -> None:
    """This module's ``main`` as ``folder/pulumi``, run by this interpreter (imported, so each call reads its
    bytecode instead of compiling it)."""
    import stat

    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "pulumi"
    target.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom tests.fake_pulumi import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    target.chmod(target.stat().st_mode | stat.S_IEXEC)


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []


# ---------------------------------------------------------------------------------------------
# The fake CLI


class Backend:
    """One backend's stacks: checkpoints by name."""

    def __init__(self, url: str) -> None:
        self.url = url
        parsed = urlparse(url)
        self.gcs = None
        if parsed.scheme == "file":
            self.folder = Path(unquote(parsed.netloc + parsed.path)).expanduser()
        elif parsed.scheme == "gs":
            from google.cloud import storage

            self.gcs = storage.Client.create_anonymous_client().bucket(parsed.netloc)
            self.prefix = parsed.path.strip("/")
        else:
            self.folder = Path(os.environ["FAKE_CLOUD"]) / quote(url, safe="")

    def path(self, stack: str) -> str:
        return f".pulumi/stacks/tpu-rl/{stack}.json"

    def read(self, stack: str) -> str | None:
        if self.gcs is not None:
            blob = self.gcs.blob(f"{self.prefix}/{self.path(stack)}" if self.prefix else self.path(stack))
            return blob.download_as_text() if blob.exists() else None
        file = self.folder / self.path(stack)
        return file.read_text() if file.is_file() else None

    def write(self, stack: str, text: str | None) -> None:
        if self.gcs is not None:
            blob = self.gcs.blob(f"{self.prefix}/{self.path(stack)}" if self.prefix else self.path(stack))
            if text is None:
                blob.delete()
            else:
                blob.upload_from_string(text)
            return
        file = self.folder / self.path(stack)
        if text is None:
            file.replace(file.with_name(file.name + ".bak"))
            return
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)

    def names(self) -> list[str]:
        if self.gcs is not None:
            return []
        base = self.folder / ".pulumi" / "stacks" / "tpu-rl"
        return sorted(p.name.removesuffix(".json") for p in base.glob("*.json")) if base.is_dir() else []


def flag(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 255


def set_provider(stack: str, provider: str) -> None:
    """``secretsprovider`` and ``encryptedkey`` at the top of the stack file, as the CLI writes them."""
    import re

    path = Path(f"Pulumi.{stack}.yaml")
    text = path.read_text() if path.exists() else "config: {}\n"
    text = re.sub(r"^(secretsprovider|encryptedkey|encryptionsalt): .*\n", "", text, flags=re.M)
    path.write_text(f"secretsprovider: {provider}\nencryptedkey: {ENCRYPTED_KEY}\n" + text)


def stack_command(argv: list[str], backend: Backend) -> int:
    verb = argv[1] if len(argv) > 1 else ""
    name = flag(argv, "--stack") or (argv[2] if len(argv) > 2 and not argv[2].startswith("-") else "")
    if verb == "ls":
        print(json.dumps([{"name": n, "current": False} for n in backend.names()]))
        return 0
    state = backend.read(name)
    if verb == "select":
        return 0 if state is not None else fail(f"no stack named '{name}' found")
    if verb == "init":
        if state is not None:
            return fail(f"stack '{name}' already exists")
        backend.write(name, json.dumps({"version": 3, "deployment": None}))
        provider = flag(argv, "--secrets-provider")
        if provider and provider != "passphrase":
            set_provider(name, provider)
        print(f"Created stack '{name}'")
        return 0
    if state is None:
        return fail(f"no stack named '{name}' found")
    if verb == "export":
        target = flag(argv, "--file")
        Path(target).write_text(state) if target else print(state)
        return 0
    if verb == "import":
        backend.write(name, Path(flag(argv, "--file") or "").read_text())
        return 0
    if verb == "rm":
        assert "--preserve-config" in argv, "stack rm without --preserve-config deletes the stack file"
        backend.write(name, None)
        return 0
    if verb == "change-secrets-provider":
        set_provider(name, argv[-1])
        return 0
    return 0


def main(argv: list[str]) -> int:
    backend_url = os.environ.get("PULUMI_BACKEND_URL")
    with open(os.environ["PULUMI_LOG"], "a") as log:
        organization = os.environ.get("PULUMI_DEFAULT_ORGANIZATION")
        log.write(json.dumps({"argv": argv, "backend": backend_url, "organization": organization}) + "\n")
    if not argv or argv[0] in ("login", "logout", "whoami"):
        return 0
    if backend_url is None:
        return fail("PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions")
    backend = Backend(backend_url)
    if argv[0] == "stack":
        return stack_command(argv, backend)
    if argv[0] == "config" and argv[1:2] == ["get"]:
        return fail(f"configuration key '{argv[2]}' not found for stack")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
