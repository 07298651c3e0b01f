"""What a container gets from the stack and what a resource runs, as the policy pack reads them, called directly:

- ``env.Mounts``: the file at one path of a ConfigMap volume (the path a command runs, the launcher's overrides at
  ``CONFIG_PATH``): which mount holds it (never a sibling folder whose name starts the same; a ``subPath``; only an
  absolute path), the key an ``items`` path names (no other key), the ConfigMap of the pod's namespace (or of one
  unset or not known yet), one whose name is not known yet, one the stack does not declare; the files a command runs;
  the mounts not known yet, noted; and the line an operator reads when the launcher's overrides are one of these
  (``scripts.trainer_runs``);
- ``env.container_env`` and ``env.expand``: the variables ``envFrom`` and ``env`` give a container, and Kubernetes'
  ``$(VAR)`` expansion; the argv the kubelet starts (``_command_words``);
- ``pods``: whether a pod asks for TPU chips (one chip does; a count not known yet is not a malformed one), the kind a
  type token names, a container not known yet (noted), a Pod's and a PodTemplate's pods, and the images a resource of
  another provider runs, named by their path to the deepest level the pack reads (known-workload-kinds,
  pinned-images);
- ``resources.Deployment.setting``: a field of a configuration value that is JSON but not an object is none;
- ``grants.own_resources``: with no ``tpu-rl:stateBackend``, a bucket whose name cannot be read is not a state
  bucket.

A file at the wrong path or from the wrong ConfigMap is a run the budget miscounts or a secret the pack never sees; a
TPU pod not seen as one is one the budget and Kueue checks pass over; an image not found is one no check judges."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs

from core.estimate import TrainingRun
from core.models import model_for_maxtext
from core.step_config import CONFIG_FILE, CONFIG_PATH, LAUNCHER, config_text
from policy.tpu_rl_policies.env import (
    ContainerEnv,
    EnvValue,
    MountedFile,
    Mounts,
    StackObjects,
    _command_words,
    container_env,
    expand,
)
from policy.tpu_rl_policies.pods import Pod, _asks_tpu, kind_of, pod_containers, pods
from policy.tpu_rl_policies.properties import UNKNOWN, Unseen
from policy.tpu_rl_policies.resources import CONFIG_MAP, DEPLOYMENT, SECRET, Deployment, Resource
from policy.tpu_rl_policies.scripts import LAUNCHED_BY, trainer_runs
from policy.tpu_rl_policies.workloads import known_workload_kinds, pinned_images
from tests.grant_cases import STACK_CONFIG, grant_findings
from tests.launcher_stack import LAUNCHER_TEXT, NAMESPACE, RUN
from tests.policy_args import OPTIONS, Reports, noting, policy_resource

pytestmark = pytest.mark.pure

# ---------------------------------------------------------------------------------------------------------------------
# env.Mounts.file: the file at one path


def _config_map(name: str, data: Any, namespace: str = NAMESPACE) -> Resource:
    props = {"metadata": {"name": name, "namespace": namespace}, "data": data}
    return Resource(CONFIG_MAP, props, f"urn:{namespace}:{name}", name)


def _mounts(source: dict[str, Any], maps: list[Resource]) -> Mounts:
    """A container of namespace ``NAMESPACE`` that mounts a ``configMap`` volume of ``source`` at ``/m``."""
    spec = {"volumes": [{"name": "v", "configMap": source}]}
    container = {"volumeMounts": [{"name": "v", "mountPath": "/m"}]}
    return Mounts(spec, container, NAMESPACE, StackObjects(maps))


SCRIPTS = [_config_map("scripts", {"a": "x", "b": "y", "bin/run.sh": "z"})]
"""A ConfigMap with a key named as the ``items`` path below gives another key: the path is read through ``items``."""
ITEMS = {"name": "scripts", "items": [{"key": "a", "path": "bin/run.sh"}]}
NOT_THERE = "a volume of ConfigMap scripts without that file"


@pytest.mark.parametrize(
    ("source", "path", "expected"),
    [
        ({"name": "scripts"}, "/m/a", MountedFile("/m/a", "x", "ConfigMap scripts key a")),
        ({"name": "scripts"}, "/m/bin/run.sh", MountedFile("/m/bin/run.sh", "z", "ConfigMap scripts key bin/run.sh")),
        ({"name": "scripts"}, "/m/c", MountedFile("/m/c", UNKNOWN, NOT_THERE)),
        (ITEMS, "/m/bin/run.sh", MountedFile("/m/bin/run.sh", "x", "ConfigMap scripts key a")),
        (ITEMS, "/m/a", MountedFile("/m/a", UNKNOWN, NOT_THERE)),
        (ITEMS, "/m/b", MountedFile("/m/b", UNKNOWN, NOT_THERE)),
        (
            {"name": "scripts", "items": [{"key": "c", "path": "run.sh"}]},
            "/m/run.sh",
            MountedFile("/m/run.sh", UNKNOWN, NOT_THERE),
        ),
        ({"name": "scripts", "items": []}, "/m/a", MountedFile("/m/a", UNKNOWN, NOT_THERE)),
        (
            {"name": "missing"},
            "/m/a",
            MountedFile("/m/a", UNKNOWN, "ConfigMap missing, which this stack does not declare"),
        ),
        ({"name": "scripts"}, "/n/a", None),
    ],
    ids=[
        "a key at its name",
        "a key whose name is a path",
        "a key the ConfigMap lacks",
        "an items path gives the key it names",
        "the key an items path names is not at its own name",
        "a key no item names is not mounted",
        "an item of a key the ConfigMap lacks",
        "empty items mount no key",
        "a ConfigMap the stack does not declare",
        "a path outside the mount",
    ],
)
def test_the_file_a_container_sees_at_a_path_of_a_config_map_volume(
    source: dict[str, Any], path: str, expected: MountedFile | None
) -> None:
    """A volume without ``items`` holds each key at its name; with ``items``, only the keys they name, each at its
    item's path; a path no key is at is a file of the volume this policy names as missing."""
    assert _mounts(source, SCRIPTS).file(path) == expected


def test_a_config_map_whose_name_is_not_known_yet_is_the_file_not_known_yet() -> None:
    """The name not known yet may be any ConfigMap's: the file is not known yet either (judged at `pulumi up`), not a
    ConfigMap the stack does not declare."""
    name = Unseen("spec.volumes[0].configMap.name")
    assert _mounts({"name": name}, SCRIPTS).file("/m/a") == MountedFile(
        "/m/a", name, "a ConfigMap whose name is not known yet"
    )


def test_the_file_is_read_from_the_config_map_of_the_pods_namespace() -> None:
    """Two ConfigMaps of one name in two namespaces: the file is the pod's namespace's, not one of two candidates."""
    maps = [_config_map("scripts", {"a": "other"}, namespace="other"), _config_map("scripts", {"a": "x"})]
    assert _mounts({"name": "scripts"}, maps).file("/m/a") == MountedFile("/m/a", "x", "ConfigMap scripts key a")


def _mounted_at(mount: dict[str, Any], data: dict[str, str]) -> Mounts:
    """A container that mounts a ``configMap`` volume of ConfigMap ``scripts`` (of ``data``) as ``mount`` says."""
    spec = {"volumes": [{"name": "v", "configMap": {"name": "scripts"}}]}
    return Mounts(
        spec, {"volumeMounts": [{"name": "v", **mount}]}, NAMESPACE, StackObjects([_config_map("scripts", data)])
    )


@pytest.mark.parametrize(
    ("mount", "data", "path", "expected"),
    [
        ({"mountPath": "/"}, {"run.sh": "a"}, "/run.sh", MountedFile("/run.sh", "a", "ConfigMap scripts key run.sh")),
        ({"mountPath": "/optX"}, {"run.sh": "a"}, "/opt/run.sh", None),
        ({"mountPath": "/opt "}, {"run.sh": "a"}, "/opt/run.sh", None),
        (
            {"mountPath": "/opt/"},
            {"run.sh": "a"},
            "/opt/run.sh",
            MountedFile("/opt/run.sh", "a", "ConfigMap scripts key run.sh"),
        ),
        ({"mountPath": "/m"}, {"runX": "a"}, "/m/runX", MountedFile("/m/runX", "a", "ConfigMap scripts key runX")),
        (
            {"mountPath": "/m"},
            {"run.sh": "a"},
            "/m//run.sh/",
            MountedFile("/m//run.sh/", "a", "ConfigMap scripts key run.sh"),
        ),
        (
            {"mountPath": "/opt/lib", "subPath": "lib"},
            {"lib/util.sh": "a", "util.sh": "b"},
            "/opt/lib/util.sh",
            MountedFile("/opt/lib/util.sh", "a", "ConfigMap scripts key lib/util.sh"),
        ),
        (
            {"mountPath": "/opt/lib", "subPath": "/lib/"},
            {"lib/util.sh": "a"},
            "/opt/lib/util.sh",
            MountedFile("/opt/lib/util.sh", "a", "ConfigMap scripts key lib/util.sh"),
        ),
        (
            {"mountPath": "/opt/lib", "subPath": "libX"},
            {"libX/util.sh": "a", "lib/util.sh": "b"},
            "/opt/lib/util.sh",
            MountedFile("/opt/lib/util.sh", "a", "ConfigMap scripts key libX/util.sh"),
        ),
        (
            {"mountPath": "/opt/lib", "subPath": "lib "},
            {"lib /util.sh": "a", "lib/util.sh": "b"},
            "/opt/lib/util.sh",
            MountedFile("/opt/lib/util.sh", "a", "ConfigMap scripts key lib /util.sh"),
        ),
        (
            {"mountPath": "/tpu-rl/run.sh", "subPath": "run.sh"},
            {"run.sh": "a"},
            "/tpu-rl/run.sh",
            MountedFile("/tpu-rl/run.sh", "a", "ConfigMap scripts key run.sh"),
        ),
        ({"mountPath": "m"}, {"run.sh": "a"}, "m/run.sh", None),
        ({"mountPath": "/m"}, {"run.sh": "a"}, "m/run.sh", None),
    ],
    ids=[
        "a mount at the root holds every absolute path",
        "a folder whose name ends in X is another folder",
        "a folder whose name ends in a space is another folder",
        "a mount path with a trailing slash",
        "a file name ending in X keeps it",
        "slashes around the path inside the mount are dropped",
        "a subPath folder mount",
        "slashes around the subPath are dropped",
        "a subPath ending in X keeps it",
        "a subPath ending in a space keeps it",
        "a subPath mount of one key",
        "a relative path is no file of a mount",
        "a relative path is no file of an absolute mount",
    ],
)
def test_which_mount_holds_a_path_and_the_key_it_is(
    mount: dict[str, Any], data: dict[str, str], path: str, expected: MountedFile | None
) -> None:
    """A mount holds its own path and the paths below it (never a sibling whose name merely starts the same); the key
    is the path below the mount, under the ``subPath`` folder where the mount has one; only an absolute path is read
    (a relative one depends on the working directory)."""
    assert _mounted_at(mount, data).file(path) == expected


def test_a_mount_without_a_path_holds_no_file_and_may_cover_any_path() -> None:
    """A volume mount whose ``mountPath`` is missing mounts no file this policy reads, but may be over any path (it
    counts for every path, so a launcher under it is not read as certain)."""
    mounts = _mounted_at({}, {"run.sh": "a"})
    assert (mounts.files(), mounts.file("/run.sh"), mounts.covering("/tpu-rl/run.sh")) == ([], None, 1)


def test_each_file_a_command_runs_and_each_its_scripts_name() -> None:
    """Every word of the command that is a mounted file, then each mounted path named in their text, once each."""
    data = {"a": "source /m/c", "b": "true", "c": "true"}
    mounts = _mounted_at({"mountPath": "/m"}, data)
    assert mounts.run_files(["bash", "/m/a", "/m/b", "/m/a"]) == [
        MountedFile(f"/m/{key}", text, f"ConfigMap scripts key {key}") for key, text in data.items()
    ]


def _noted(read: Any) -> list[str]:
    """The paths of the values not known yet that ``read`` noted as read."""
    return [value.path for value in noting(read)[1]]


@pytest.mark.parametrize(
    ("where", "name", "noted"),
    [
        (Unseen("mountPath"), "v", ["mountPath"]),
        (Unseen("mountPath"), Unseen("name"), ["mountPath"]),
        ("/m", Unseen("name"), ["name"]),
    ],
    ids=["a path not known yet", "a path and a name not known yet", "a volume name not known yet"],
)
def test_a_volume_mount_not_known_yet_is_noted_as_read(where: Any, name: Any, noted: list[str]) -> None:
    """A mount whose path or volume is not known yet may be over any file: it is noted (a finding on the container
    waits for `pulumi up`, where "cannot judge" names exactly these values), the path first, and nothing else."""
    spec = {"volumes": [{"name": "v", "configMap": {"name": "scripts"}}]}
    container = {"volumeMounts": [{"name": name, "mountPath": where}]}
    assert _noted(lambda: Mounts(spec, container, NAMESPACE, StackObjects([]))) == noted


@pytest.mark.parametrize(
    ("container", "words"),
    [
        ({"command": ["bash"], "args": ["/m/run.sh", 7]}, ["bash", "/m/run.sh", "7"]),
        ({"args": ["$(DIR)/run.sh"]}, ["/m/run.sh"]),
        ({"command": ["$(NOT_SET)", 1.5]}, ["$(NOT_SET)", "1.5"]),
    ],
    ids=["command then args, a number as its text", "args alone, expanded", "an unset variable stays as written"],
)
def test_the_words_a_container_starts(container: dict[str, Any], words: list[str]) -> None:
    """The argv the kubelet starts: ``command`` then ``args``, ``$(VAR)`` expanded; the files a command runs are read
    from these words."""
    env = ContainerEnv({"DIR": EnvValue("/m", "literal", "literal")})
    assert _command_words(container, env) == words


@pytest.mark.parametrize(
    ("map_namespace", "pod_namespace"),
    [(None, NAMESPACE), (NAMESPACE, None)],
    ids=["a ConfigMap without a namespace", "a pod without a namespace"],
)
def test_a_config_map_without_a_namespace_may_be_the_pods(map_namespace: str | None, pod_namespace: str | None) -> None:
    """Either namespace unset (the provider's default, which may be the other's): the ConfigMap of that name is the
    one mounted, not one the stack does not declare."""
    metadata = {"name": "scripts"} | ({"namespace": map_namespace} if map_namespace else {})
    maps = StackObjects([Resource(CONFIG_MAP, {"metadata": metadata, "data": {"a": "x"}}, "urn:scripts", "scripts")])
    spec = {"volumes": [{"name": "v", "configMap": {"name": "scripts"}}]}
    mounts = Mounts(spec, {"volumeMounts": [{"name": "v", "mountPath": "/m"}]}, pod_namespace, maps)
    assert mounts.file("/m/a") == MountedFile("/m/a", "x", "ConfigMap scripts key a")


def test_a_config_map_value_that_is_not_text_is_a_value_the_policy_cannot_read() -> None:
    """A ConfigMap's value the program gave as a number or a list is ``UNKNOWN`` in the environment, as no text the
    policy reads (never compared or looked up as it is: a list is no key of a set of repositories)."""
    maps = StackObjects([_config_map("settings", {"COUNT": 7, "REPOS": ["a"], "NAME": "x"})])
    container = {"envFrom": [{"configMapRef": {"name": "settings"}}]}
    assert container_env(container, NAMESPACE, maps).values == {
        var: EnvValue(value, "ConfigMap settings", "ConfigMap", from_env_from=True)
        for var, value in (("COUNT", UNKNOWN), ("REPOS", UNKNOWN), ("NAME", "x"))
    }


def _secret(name: str, data: dict[str, str]) -> Resource:
    props = {"metadata": {"name": name, "namespace": NAMESPACE}, "data": data}
    return Resource(SECRET, props, f"urn:{NAMESPACE}:{name}", name)


PENDING_DATA = Unseen("data of pending")
OBJECTS = [
    Resource("kubernetes:core/v1:Namespace", {"metadata": {"name": NAMESPACE}}, "urn:ns", "ns"),
    Resource(CONFIG_MAP, {"metadata": {"namespace": NAMESPACE}, "data": {"A": "nameless"}}, "urn:nameless", "nameless"),
    _config_map("settings", {"A": "1", "B": "2"}),
    _config_map("settings", {"A": "elsewhere"}, namespace="other"),
    _config_map("pending", PENDING_DATA),
    _secret("creds", {"TOKEN": "dA=="}),
]
"""A namespace and a ConfigMap without a name (no object to read), ``settings`` in the pod's namespace and in
another, a ConfigMap whose data is not known yet, and a Secret."""


def test_the_variables_envfrom_gives_a_container() -> None:
    """Each ``envFrom`` source in order, a Secret's keys with its prefix; a source the stack does not declare is named
    (any variable may come from it) and the next source is still read, the next kind of the same source too (a source
    that names both is refused by the API server, but the pack reads what it is given)."""
    container = {
        "envFrom": [
            {"configMapRef": {"name": "missing"}, "secretRef": {"name": "creds"}},
            {"configMapRef": {"name": "settings"}},
            {"secretRef": {"name": "creds"}, "prefix": "S_"},
        ]
    }
    assert container_env(container, NAMESPACE, StackObjects(OBJECTS)) == ContainerEnv(
        values={
            "TOKEN": EnvValue("t", "Secret creds", "Secret", from_env_from=True),
            "A": EnvValue("1", "ConfigMap settings", "ConfigMap", from_env_from=True),
            "B": EnvValue("2", "ConfigMap settings", "ConfigMap", from_env_from=True),
            "S_TOKEN": EnvValue("t", "Secret creds", "Secret", from_env_from=True),
        },
        unseen=["ConfigMap missing"],
    )


def test_the_variables_env_gives_a_container() -> None:
    """Each ``env`` entry in order: a literal (empty when it has no value; a number as its text), a key of the pod's
    namespace's ConfigMap, a ConfigMap whose data is not known yet, one the stack does not declare, and a value the pod
    gets at run time; an entry without a name, or a key the ConfigMap lacks, sets nothing."""
    container = {
        "env": [
            {"value": "no name"},
            {"name": "EMPTY"},
            {"name": "NUMBER", "value": 7},
            {"name": "FROM_MAP", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "B"}}},
            {"name": "LACKING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "C"}}},
            {"name": "PENDING", "valueFrom": {"configMapKeyRef": {"name": "pending", "key": "A"}}},
            {"name": "MISSING", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "A"}}},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ]
    }
    assert container_env(container, NAMESPACE, StackObjects(OBJECTS)) == ContainerEnv(
        values={
            "EMPTY": EnvValue("", "literal", "literal"),
            "NUMBER": EnvValue("7", "literal", "literal"),
            "FROM_MAP": EnvValue("2", "ConfigMap settings", "ConfigMap"),
            "PENDING": EnvValue(PENDING_DATA, "ConfigMap pending", "ConfigMap"),
            "MISSING": EnvValue(UNKNOWN, "Secret absent, which this stack does not declare", "Secret"),
            "POD": EnvValue(UNKNOWN, "a value the pod gets at run time", "runtime"),
        }
    )


def test_a_config_map_whose_namespace_is_not_known_yet_may_be_the_pods() -> None:
    """Its namespace an output not known yet (a Namespace the stack creates): it may be the pod's, so its file is
    read, not named as a ConfigMap the stack does not declare."""
    props = {"metadata": {"name": "scripts", "namespace": Unseen("metadata.namespace")}, "data": {"a": "x"}}
    maps = StackObjects([Resource(CONFIG_MAP, props, "urn:scripts", "scripts")])
    spec = {"volumes": [{"name": "v", "configMap": {"name": "scripts"}}]}
    mounts = Mounts(spec, {"volumeMounts": [{"name": "v", "mountPath": "/m"}]}, NAMESPACE, maps)
    assert mounts.file("/m/a") == MountedFile("/m/a", "x", "ConfigMap scripts key a")


PENDING = Unseen("data")
"""A ConfigMap value not known yet (its data is an output of a resource not created yet)."""
ENV = {
    "DIR": EnvValue("/m", "literal", "literal"),
    "RUNTIME": EnvValue(UNKNOWN, "a value the pod gets at run time", "runtime"),
    "PENDING": EnvValue(PENDING, "ConfigMap pending", "ConfigMap"),
    "": EnvValue(UNKNOWN, "a value the pod gets at run time", "runtime"),
}


@pytest.mark.parametrize(
    ("text", "keep_unknown", "expanded"),
    [
        ("$(DIR)/run.sh", False, "/m/run.sh"),
        ("$(DIR)x", False, "/mx"),
        ("$(DIR)x)", False, "/mx)"),
        ("x)$(DIR)", False, "x)/m"),
        ("cost$", False, "cost$"),
        ("$5 each", False, "$5 each"),
        ("a$$", False, "a$"),
        ("$$(DIR)", False, "$(DIR)"),
        ("$(DIR", False, "$(DIR"),
        ("a$(DIR", False, "a$(DIR"),
        ("$(NOT_SET)/run.sh", False, "$(NOT_SET)/run.sh"),
        ("$()$(DIR)", False, UNKNOWN),
        ("$(RUNTIME)/run.sh", False, UNKNOWN),
        ("$(RUNTIME)/run.sh", True, "$(RUNTIME)/run.sh"),
        ("$(PENDING)/run.sh", False, PENDING),
        ("$(PENDING)/run.sh", True, "$(PENDING)/run.sh"),
    ],
    ids=[
        "a variable defined before",
        "the text after a reference",
        "a closing parenthesis after a reference",
        "a closing parenthesis before a reference",
        "a dollar at the end stays",
        "a dollar before another character stays",
        "a doubled dollar at the end is one",
        "a doubled dollar escapes a reference",
        "an unclosed reference stays",
        "an unclosed reference after text stays",
        "a variable not defined stays as written",
        "an empty reference names the variable named empty",
        "a variable known at run time makes the value unknown",
        "a variable known at run time stays in a command",
        "a variable not known yet makes the value that one",
        "a variable not known yet stays in a command",
    ],
)
def test_how_a_value_expands_variables(text: str, keep_unknown: bool, expanded: Any) -> None:
    """Kubernetes' ``$(VAR)`` expansion: a reference runs to the first ``)`` after it, ``$$`` is one ``$``, a lone
    ``$`` or an unclosed or undefined reference stays as written. A variable the policy cannot read makes an ``env``
    value one it cannot read (not known yet: that very value, noted when read); in a command's words it stays as
    written."""
    result = expand(text, ENV, keep_unknown=keep_unknown)
    assert result is expanded or result == expanded


def test_an_environment_value_naming_a_variable_known_at_run_time_is_unknown() -> None:
    """The same through ``container_env``: ``B`` names ``A``, a ``fieldRef`` the pod gets at run time."""
    container = {
        "env": [
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "B", "value": "$(A)-run"},
        ]
    }
    assert container_env(container, NAMESPACE, StackObjects([])).values["B"] == EnvValue(UNKNOWN, "literal", "literal")


def _run() -> TrainingRun:
    model = model_for_maxtext(RUN["model_name"])
    assert model is not None
    return TrainingRun(model=model.name, num_batches=7, batch_size=4, num_generations=2, max_target_length=1024)


OVERRIDES = config_text(f"{k}={v}" for k, v in RUN.items())


@pytest.mark.parametrize(
    ("overrides_source", "maps", "expected"),
    [
        (
            {"name": "overrides", "items": [{"key": "run", "path": CONFIG_FILE}]},
            [_config_map("overrides", {"run": OVERRIDES, CONFIG_FILE: "not a config"})],
            _run(),
        ),
        (
            {"name": "overrides", "items": [{"key": "run", "path": "other.json"}]},
            [_config_map("overrides", {"run": OVERRIDES, CONFIG_FILE: OVERRIDES})],
            f"cannot read {CONFIG_PATH} (a volume of ConfigMap launcher without that file), which {LAUNCHED_BY} reads",
        ),
        (
            {"name": "missing"},
            [],
            f"cannot read {CONFIG_PATH} (ConfigMap missing, which this stack does not declare), which {LAUNCHED_BY} "
            "reads",
        ),
        (
            {"name": Unseen("spec.volumes[0].projected.sources[1].configMap.name")},
            [],
            f"cannot read {CONFIG_PATH} (a ConfigMap whose name is not known yet), which {LAUNCHED_BY} reads",
        ),
    ],
    ids=[
        "overrides at their items path",
        "overrides at another items path",
        "overrides of a ConfigMap the stack does not declare",
        "overrides of a ConfigMap whose name is not known yet",
    ],
)
def test_the_run_the_launcher_makes_of_the_overrides_at_their_mounted_path(
    overrides_source: dict[str, Any], maps: list[Resource], expected: TrainingRun | str
) -> None:
    """The launcher and its overrides in one projected volume at ``/tpu-rl``: the overrides are the key an ``items``
    path puts at ``train.json`` (not the key named ``train.json``), and where they cannot be read the run's line says
    where the policy looked."""
    maps = [_config_map("launcher", {LAUNCHER: LAUNCHER_TEXT}), *maps]
    sources = [{"configMap": {"name": "launcher"}}, {"configMap": overrides_source}]
    spec = {"volumes": [{"name": "v", "projected": {"sources": sources}}]}
    container = {"volumeMounts": [{"name": "v", "mountPath": "/tpu-rl"}]}
    mounts = Mounts(spec, container, NAMESPACE, StackObjects(maps))
    assert trainer_runs(["python3", f"/tpu-rl/{LAUNCHER}"], ContainerEnv(), mounts).runs == [expected]


# ---------------------------------------------------------------------------------------------------------------------
# pods._asks_tpu: whether a pod asks for TPU chips


def _spec(chips: Any, part: str = "limits") -> dict[str, Any]:
    return {"containers": [{"name": "c", "resources": {part: {"google.com/tpu": chips}}}]}


@pytest.mark.parametrize(
    ("spec", "malformed", "asks"),
    [
        (_spec("1"), False, True),
        (_spec(1, "requests"), False, True),
        (_spec("0"), True, False),
        (_spec(Unseen("spec.containers[0].resources.limits")), True, False),
        (_spec("four"), True, True),
        (_spec("four"), False, False),
    ],
    ids=[
        "one chip asks",
        "one chip requested as a number asks",
        "no chips do not ask",
        "a count not known yet is not malformed",
        "a malformed count asks where asking costs",
        "a malformed count does not exempt",
    ],
)
def test_whether_a_pod_asks_for_tpu_chips(spec: dict[str, Any], malformed: bool, asks: bool) -> None:
    """Any count above zero asks (a pod of one chip is a TPU pod the budget counts); a count not known yet is left to
    `pulumi up`, never read as a malformed one (which counts as asking where asking costs money)."""
    assert _asks_tpu(spec, malformed=malformed) is asks


@pytest.mark.parametrize(
    ("type_", "kind"),
    [
        ("kubernetes:apps/v1:Deployment", "Deployment"),
        ("kubernetes:apps/v1:DeploymentPatch", "Deployment"),
        ("kubernetes:example.com/v1:PatchRun", "PatchRun"),
        ("kubernetes:example.com/v1:Patch", "Patch"),
        ("gcp:storage/bucket:Bucket", None),
    ],
    ids=["a kind", "a patch of a kind", "a kind starting with Patch", "a kind named Patch", "not Kubernetes"],
)
def test_the_kubernetes_kind_a_type_token_names(type_: str, kind: str | None) -> None:
    """The kind a message names: the token's last part, a ``...Patch`` as the kind it patches."""
    assert kind_of(type_) == kind


def test_a_container_not_known_yet_is_noted_not_passed_over() -> None:
    """A container entry not known yet is no container the pack reads, but reading it is noted (the pod is judged at
    `pulumi up`, where "cannot judge" names it)."""
    containers: list[Any] = []
    noted = _noted(lambda: containers.extend(pod_containers({"containers": [Unseen("spec.containers[0]"), {"a": 1}]})))
    assert (containers, noted) == ([{"a": 1}], ["spec.containers[0]"])


CONTAINERS = {"containers": [{"name": "c", "image": "i"}]}


@pytest.mark.parametrize(
    ("type_", "props", "expected"),
    [
        ("kubernetes:core/v1:Pod", {"metadata": {"name": "p"}}, []),
        (
            "kubernetes:core/v1:Pod",
            {"metadata": {"name": "p"}, "spec": CONTAINERS},
            [Pod("spec", CONTAINERS, {"name": "p"})],
        ),
        (
            "kubernetes:core/v1:PodTemplate",
            {
                "metadata": {"namespace": NAMESPACE},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": CONTAINERS},
            },
            [Pod("template", CONTAINERS, {"labels": {"a": "b"}}, namespace=NAMESPACE)],
        ),
        (
            "kubernetes:batch/v1:CronJob",
            {
                "metadata": {"namespace": NAMESPACE},
                "spec": {
                    "jobTemplate": {"spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": CONTAINERS}}}
                },
            },
            [Pod("spec.jobTemplate.spec.template", CONTAINERS, {"labels": {"a": "b"}}, namespace=NAMESPACE)],
        ),
        (
            "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet",
            {
                "metadata": {"namespace": NAMESPACE},
                "spec": {
                    "coordinator": {"replicatedJob": "head"},
                    "replicatedJobs": [
                        {"name": job, "template": {"spec": {"template": {"spec": CONTAINERS}}}}
                        for job in ("head", 7, "workers")
                    ],
                },
            },
            [
                Pod("head", CONTAINERS, {}, True, namespace=NAMESPACE),
                Pod("spec.replicatedJobs[1]", CONTAINERS, {}, False, namespace=NAMESPACE),
                Pod("workers", CONTAINERS, {}, False, namespace=NAMESPACE),
            ],
        ),
    ],
    ids=[
        "a Pod without a spec has no pod",
        "a Pod's spec",
        "a PodTemplate's template",
        "a CronJob's job template",
        "a JobSet's replicated jobs",
    ],
)
def test_the_pods_of_each_built_in_kind_at_its_api_path(type_: str, props: dict[str, Any], expected: list[Pod]) -> None:
    """A Pod's pod is its ``spec`` (none without one: no empty pod judged); a PodTemplate's is its ``template``, a
    CronJob's its ``spec.jobTemplate.spec.template``, a JobSet's each replicated job's (named by the job, or by its
    index where its name is no text; the coordinator's job is the head): at the kind's API path (placed: its namespace
    and account are judged, it is no custom workload), in the object's namespace."""
    assert pods(type_, props) == expected


def test_a_pod_template_is_a_known_workload_kind() -> None:
    """known-workload-kinds passes a PodTemplate: its pod spec is at the kind's API path."""
    type_ = "kubernetes:core/v1:PodTemplate"
    props = {"metadata": {"name": "t"}, "template": {"spec": CONTAINERS}}
    report = Reports()
    known_workload_kinds.validate(ResourceValidationArgs(type_, props, f"urn:{type_}::t", "t", OPTIONS, None), report)
    assert report.calls == []


# ---------------------------------------------------------------------------------------------------------------------
# pods._foreign: the images a resource of another provider runs, as known-workload-kinds and pinned-images name them

PUBLIC = "docker.io/library/nginx:latest"


def _nested(keys: int, inner: Any) -> Any:
    for _ in range(keys):
        inner = {"a": inner}
    return inner


def _listed(lists: int, inner: Any) -> Any:
    for _ in range(lists):
        inner = [inner]
    return inner


DEEPEST = _nested(64, {"image": PUBLIC})
"""The image's mapping 64 levels below the props, the deepest the pack reads (its text is deeper: not known)."""


@pytest.mark.parametrize(
    ("type_", "props", "paths"),
    [
        (
            "gcp:cloudrunv2/service:Service",
            {"template": {"containers": [{"image": PUBLIC}]}},
            "template.containers[0].image",
        ),
        (
            "gcp:compute/instance:Instance",
            {"metadata": {"gce-container-declaration": f"spec:\n  containers:\n  - image: {PUBLIC}\n"}},
            "metadata.gce-container-declaration.spec.containers[0].image",
        ),
        ("gcp:compute/instance:Instance", DEEPEST, ".".join(["a"] * 64) + ".image"),
        ("gcp:compute/instance:Instance", {"a": _listed(63, {"image": PUBLIC})}, "a" + "[0]" * 63 + ".image"),
        (
            "gcp:compute/instance:Instance",
            {"d": str(_nested(63, {"image": PUBLIC})).replace("'", "")},
            "d" + ".a" * 63 + ".image",
        ),
    ],
    ids=[
        "a Cloud Run container",
        "a container declaration text",
        "an image 64 mappings deep",
        "an image 64 lists deep",
        "an image 64 levels deep through a text",
    ],
)
def test_a_resource_of_another_provider_is_refused_naming_where_it_runs_an_image(
    type_: str, props: dict[str, Any], paths: str
) -> None:
    """Every image it names, to the deepest level the pack reads, is where the refusal says the resource runs one."""
    report = Reports()
    known_workload_kinds.validate(
        ResourceValidationArgs(type_, props, f"urn:{type_}::svc", "svc", OPTIONS, None), report
    )
    assert report.calls == [
        (
            f"{type_} svc runs images outside the cluster ({paths}): tpu-rl runs its steps as JobSets in its cluster, "
            "where the pack judges their pods' identity and host access; remove it",
            None,
        )
    ]


def test_an_image_of_another_provider_is_judged_as_a_container_named_by_its_path() -> None:
    """pinned-images names the image's container by where the resource names it."""
    type_ = "gcp:cloudrunv2/service:Service"
    props = {"template": {"containers": [{"image": PUBLIC}]}}
    report = Reports()
    args = ResourceValidationArgs(type_, props, f"urn:{type_}::svc", "svc", OPTIONS, None, {"digests": False})
    pinned_images.validate(args, report)
    assert report.calls == [
        (f"container template.containers[0].image: image {PUBLIC} is not pinned; use a version tag or a digest", None)
    ]


# ---------------------------------------------------------------------------------------------------------------------
# resources.Deployment.setting: a field of an object setting


@pytest.mark.parametrize(
    ("text", "expected"),
    [('{"name": "gemma4-26b"}', "gemma4-26b"), ('["gemma4-26b"]', None), ('"gemma4-26b"', None), ("7", None)],
    ids=["an object", "a list", "a string", "a number"],
)
def test_a_field_of_a_setting_that_is_not_a_json_object_is_none(text: str, expected: str | None) -> None:
    """``tpu-rl:model``'s ``name`` is read from the JSON object the engine sends; a value that is JSON but no object
    has no field (None), never an error that stops the policy."""
    assert Deployment(config={"tpu-rl:model": text}).setting("tpu-rl:model", "name") == expected


# ---------------------------------------------------------------------------------------------------------------------
# grants.own_resources: the recorded state home

BUCKET_TYPE = "gcp:storage/bucket:Bucket"


def _bucket(props: dict[str, Any]) -> Any:
    return policy_resource(BUCKET_TYPE, "bucket", props, stack="prod")


def _grant_findings(monkeypatch: pytest.MonkeyPatch, config: dict[str, str], bucket: Any) -> list[Any]:
    monkeypatch.setattr(DEPLOYMENT, "config", dict(config))
    monkeypatch.setattr(DEPLOYMENT, "dry_run", False)
    return grant_findings([bucket])


@pytest.mark.parametrize("props", [{}, {"name": 7}], ids=["no name", "a name that is no text"])
def test_with_no_state_home_recorded_a_bucket_without_a_readable_name_is_no_state_bucket(
    monkeypatch: pytest.MonkeyPatch, props: dict[str, Any]
) -> None:
    """No ``tpu-rl:stateBackend``: only a name of the state buckets' form is one; a bucket whose name cannot be read
    as text is not said to be named as one."""
    assert _grant_findings(monkeypatch, STACK_CONFIG, _bucket(props)) == []


def test_a_bucket_named_as_the_recorded_state_home_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The contrast: the recorded home's bucket, declared by the stack, is refused on the bucket's URN."""
    config = {**STACK_CONFIG, "tpu-rl:stateBackend": "gs://team-state-home"}
    assert _grant_findings(monkeypatch, config, _bucket({"name": "team-state-home"})) == [
        (
            "bucket: the stack's bucket is named as a Pulumi state bucket (team-state-home): its grants would reach "
            "the state: name the bucket otherwise (tpu-rl:bucketName)",
            "urn:pulumi:prod::tpu-rl::gcp:storage/bucket:Bucket::bucket",
        )
    ]
