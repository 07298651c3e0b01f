"""Every file a container's ConfigMap volumes hold, as the policy pack reads them (``env.Mounts.files``), and what
``scripts.trainer_runs`` makes of them: the path each key is at (``items`` paths, a ``subPath`` mount, slashes as
the kubelet joins them), a ConfigMap not known yet or not declared, and the runs and unread files an operator is
told about. The budget and the trainer-mention findings rest on these: a file at the wrong path, or one missed, is
a run the policy miscounts or a mention it never sees."""

from __future__ import annotations

from typing import Any

import pytest

from core.estimate import TrainingRun
from core.models import model_for_maxtext
from core.step_config import CONFIG_FILE, LAUNCHER, config_text
from policy.tpu_rl_policies.env import ContainerEnv, EnvValue, MountedFile, Mounts, StackObjects
from policy.tpu_rl_policies.properties import UNKNOWN, Unseen
from policy.tpu_rl_policies.resources import CONFIG_MAP, Resource
from policy.tpu_rl_policies.scripts import trainer_runs
from tests.launcher_stack import LAUNCHER_TEXT, NAMESPACE, RUN
from tests.policy_args import noting

pytestmark = pytest.mark.pure


def _config_map(name: str, data: Any, namespace: str = NAMESPACE) -> Resource:
    props = {"metadata": {"name": name, "namespace": namespace}, "data": data}
    return Resource(CONFIG_MAP, props, f"urn:{namespace}:{name}", name)


def _mounts(volume: dict[str, Any], mount: dict[str, Any], maps: list[Resource]) -> Mounts:
    """A container that mounts ``volume`` (named ``v``) as ``mount`` says, in a stack of ``maps``."""
    spec = {"volumes": [{"name": "v", **volume}]}
    container = {"volumeMounts": [{"name": "v", **mount}]}
    return Mounts(spec, container, NAMESPACE, StackObjects(maps))


def _files(data: dict[str, str], mount_path: str, sub_path: str | None = None) -> list[tuple[str, str]]:
    """(path, source) of each file a ConfigMap ``scripts`` of ``data`` gives a container at ``mount_path``."""
    mount = {"mountPath": mount_path} | ({"subPath": sub_path} if sub_path is not None else {})
    files = _mounts({"configMap": {"name": "scripts"}}, mount, [_config_map("scripts", data)]).files()
    assert all(f.text == data[f.source.removeprefix("ConfigMap scripts key ")] for f in files)
    return [(f.path, f.source) for f in files]


def _key(key: str) -> str:
    return f"ConfigMap scripts key {key}"


@pytest.mark.parametrize(
    ("data", "mount_path", "sub_path", "expected"),
    [
        ({"run.sh": "a"}, "/scripts", None, [("/scripts/run.sh", _key("run.sh"))]),
        ({"lib//util.sh": "a"}, "/scripts", None, [("/scripts/lib/util.sh", _key("lib//util.sh"))]),
        ({"FIX": "a"}, "/scripts", None, [("/scripts/FIX", _key("FIX"))]),
        ({"notes ": "a"}, "/scripts", None, [("/scripts/notes ", _key("notes "))]),
        ({"run.sh": "a"}, "/tpu-rl/run.sh", "run.sh", [("/tpu-rl/run.sh", _key("run.sh"))]),
        ({"run.sh": "a"}, "/", "run.sh", [("/", _key("run.sh"))]),
        ({"lib/util.sh": "a"}, "/opt/lib", "lib", [("/opt/lib/util.sh", _key("lib/util.sh"))]),
        ({"lib/util.sh": "a"}, "/opt/lib ", "lib", [("/opt/lib /util.sh", _key("lib/util.sh"))]),
        ({"lib/util.sh": "a"}, "/opt/X", "lib", [("/opt/X/util.sh", _key("lib/util.sh"))]),
        ({"lib//util.sh": "a"}, "/opt/lib", "lib", [("/opt/lib/util.sh", _key("lib//util.sh"))]),
        ({"lib/X.sh": "a"}, "/opt/lib", "lib", [("/opt/lib/X.sh", _key("lib/X.sh"))]),
        ({"library.sh": "a", "run.sh": "b"}, "/opt/lib", "lib", []),
        ({"run.sh": "a", "lib/util.sh": "b"}, "/opt/lib", "lib", [("/opt/lib/util.sh", _key("lib/util.sh"))]),
    ],
    ids=[
        "a key under the mount path",
        "a doubled slash is one",
        "a name ending in X keeps it",
        "a name ending in a space keeps it",
        "a subPath mount of one key is that file",
        "a subPath mount at the root is the root",
        "a subPath folder mount holds the keys under it",
        "a mount path ending in a space keeps it",
        "a mount path ending in X keeps it",
        "a doubled slash after the subPath is one",
        "a name under the subPath starting with X keeps it",
        "keys outside the subPath folder are not mounted",
        "a key outside the subPath before one inside",
    ],
)
def test_the_path_each_key_of_a_config_map_volume_is_at(
    data: dict[str, str], mount_path: str, sub_path: str | None, expected: list[tuple[str, str]]
) -> None:
    """Each key is a file at the mount path joined with its name (slashes collapsed, none trailing); a ``subPath``
    mount holds the key it names, or the keys under the folder it names, at the mount path itself."""
    assert _files(data, mount_path, sub_path) == expected


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ([{"key": "a", "path": "bin/run.sh"}], [MountedFile("/m/bin/run.sh", "x", "ConfigMap scripts key a")]),
        ([{"key": "a"}], []),
        ([{"path": "bin/run.sh"}], []),
        (
            [{"key": "missing", "path": "gone.sh"}, {"key": "b", "path": "run.sh"}],
            [MountedFile("/m/run.sh", "y", "ConfigMap scripts key b")],
        ),
        ([], []),
    ],
    ids=[
        "a key at its item path only",
        "an item without a path",
        "an item without a key",
        "an item of a key the ConfigMap lacks before one it holds",
        "no items: no files",
    ],
)
def test_a_volume_with_items_holds_only_the_keys_they_name_at_their_paths(
    items: list[dict[str, str]], expected: list[MountedFile]
) -> None:
    """``items`` chooses the keys and where each is (the other keys are not mounted); an item that names no path,
    or a key the ConfigMap lacks, is no file."""
    maps = [_config_map("scripts", {"a": "x", "b": "y"})]
    assert _mounts({"configMap": {"name": "scripts", "items": items}}, {"mountPath": "/m"}, maps).files() == expected


def test_a_config_map_the_stack_does_not_declare_is_one_unknown_file_and_the_next_source_is_read() -> None:
    """A projected volume's ConfigMap the stack lacks is one file this policy cannot read, at the mount path; the
    volume's next source is still read."""
    sources = [{"configMap": {"name": "missing"}}, {"configMap": {"name": "scripts"}}]
    mounts = _mounts({"projected": {"sources": sources}}, {"mountPath": "/m"}, [_config_map("scripts", {"a": "x"})])
    assert mounts.files() == [
        MountedFile("/m", UNKNOWN, "ConfigMap missing, which this stack does not declare"),
        MountedFile("/m/a", "x", "ConfigMap scripts key a"),
    ]


def test_a_config_map_whose_data_is_not_known_yet_is_one_unseen_file_and_the_next_source_is_read() -> None:
    """Its keys are not known yet: one file at the mount path, its text the ConfigMap's data not known yet."""
    pending = Unseen("data")
    maps = [_config_map("pending", pending), _config_map("scripts", {"a": "x"})]
    sources = [{"configMap": {"name": "pending"}}, {"configMap": {"name": "scripts"}}]
    mounts = _mounts({"projected": {"sources": sources}}, {"mountPath": "/m"}, maps)
    assert mounts.files() == [
        MountedFile("/m", pending, "ConfigMap pending"),
        MountedFile("/m/a", "x", "ConfigMap scripts key a"),
    ]


def test_a_config_map_whose_name_is_not_known_yet_is_one_unseen_file() -> None:
    """A name not known yet may be any ConfigMap: not one the stack lacks, one whose files are not known yet."""
    name = Unseen("spec.volumes[0].configMap.name")
    mounts = _mounts({"configMap": {"name": name}}, {"mountPath": "/m"}, [])
    assert mounts.files() == [MountedFile("/m", name, "ConfigMap (not known during preview)")]


def test_the_config_map_of_the_pods_namespace_is_the_one_mounted() -> None:
    """Two ConfigMaps of one name in two namespaces: the pod mounts its own namespace's."""
    maps = [_config_map("scripts", {"a": "x"}), _config_map("scripts", {"b": "y"}, namespace="other")]
    mounts = _mounts({"configMap": {"name": "scripts"}}, {"mountPath": "/m"}, maps)
    assert mounts.files() == [MountedFile("/m/a", "x", "ConfigMap scripts key a")]


def test_files_not_known_yet_are_noted_not_reported_as_unread() -> None:
    """A run file and a mounted file whose ConfigMap data is not known yet are neither files the policy says it cannot
    read (it is judged at ``pulumi up``) nor passed over: reading them is noted."""
    pending = Unseen("data")
    mounts = _mounts({"configMap": {"name": "pending"}}, {"mountPath": "/m"}, [_config_map("pending", pending)])
    runs, noted = noting(lambda: trainer_runs(["bash", "/m/run.sh"], ContainerEnv(), mounts))
    assert (runs.unread_files, runs.unread_mounts, runs.mentions, runs.runs) == ([], [], [], [])
    assert pending in noted


def test_an_environment_value_not_known_yet_is_noted() -> None:
    """A variable not known yet may name the trainer: reading it is noted (the container is judged at ``pulumi up``)."""
    value = Unseen("spec.containers[0].env[0].value")
    env = ContainerEnv({"TRAINER": EnvValue(value, "literal", "literal")})
    runs, noted = noting(lambda: trainer_runs(["true"], env, _mounts({}, {"mountPath": "/m"}, [])))
    assert runs.mentions == []
    assert noted == [value]


def test_a_mention_of_the_trainer_after_an_unread_file_is_found() -> None:
    """A file the policy cannot read does not end the reading of the container's other files."""
    sources = [{"configMap": {"name": "missing"}}, {"configMap": {"name": "scripts"}}]
    maps = [_config_map("scripts", {"run.sh": "python3 -m maxtext.trainers.post_train.rl.train_rl\n"})]
    runs = trainer_runs(
        ["true"], ContainerEnv(), _mounts({"projected": {"sources": sources}}, {"mountPath": "/m"}, maps)
    )
    assert runs.mentions == ["/m/run.sh (ConfigMap scripts key run.sh)"]
    assert runs.unread_mounts == [MountedFile("/m", UNKNOWN, "ConfigMap missing, which this stack does not declare")]


def _run() -> TrainingRun:
    model = model_for_maxtext("gemma4-26b")
    assert model is not None
    return TrainingRun(model=model.name, num_batches=7, batch_size=4, num_generations=2, max_target_length=1024)


def _two_mounts(first: str, second: str, first_data: dict[str, str], second_data: dict[str, str]) -> Mounts:
    maps = [_config_map("one", first_data), _config_map("two", second_data)]
    spec = {"volumes": [{"name": "one", "configMap": {"name": "one"}}, {"name": "two", "configMap": {"name": "two"}}]}
    container = {"volumeMounts": [{"name": "one", "mountPath": first}, {"name": "two", "mountPath": second}]}
    return Mounts(spec, container, NAMESPACE, StackObjects(maps))


def test_each_mounted_launcher_is_a_run() -> None:
    """Two launchers mounted, the command starting one: each is a run (the other may be started by a script)."""
    overrides = {LAUNCHER: LAUNCHER_TEXT, CONFIG_FILE: config_text(f"{k}={v}" for k, v in RUN.items())}
    mounts = _two_mounts("/tpu-rl", "/opt/b", overrides, {LAUNCHER: LAUNCHER_TEXT})
    assert trainer_runs(["python3", f"/tpu-rl/{LAUNCHER}"], ContainerEnv(), mounts).runs == [_run(), _run()]


def test_a_launcher_path_named_twice_across_command_words_is_two_runs() -> None:
    """The command is read as its words joined by spaces: a launcher path with a space, named twice, is two runs."""
    overrides = {CONFIG_FILE: config_text(f"{k}={v}" for k, v in RUN.items())}
    mounts = _two_mounts("/tpu rl", "/tpu-rl", {LAUNCHER: LAUNCHER_TEXT}, overrides)
    words = ["python3", "/tpu", f"rl/{LAUNCHER}", ";", "python3", "/tpu", f"rl/{LAUNCHER}"]
    assert trainer_runs(words, ContainerEnv(), mounts).runs == [_run(), _run()]
