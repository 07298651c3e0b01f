"""Three readings the policy pack's judgements rest on, called directly: the run a TPU container starts through
tpu-rl's launcher (``scripts``: the launcher's overrides file, each run key read once, a top-level key from its
``M_<KEY>`` variable), how many volume mounts cover a path (``Mounts.covering``: more than one, and the runtime's
mount order decides which file the container sees), and which principals are the stack's own (``iam``: its Google
accounts by email, its Kubernetes service accounts in its namespace)."""

from __future__ import annotations

from typing import Any

import pytest

from core.estimate import TrainingRun
from core.models import model_for_maxtext
from core.step_config import CONFIG_FILE, CONFIG_PATH, LAUNCHER, config_text
from policy.tpu_rl_policies.env import EnvValue, Mounts, StackObjects, container_env
from policy.tpu_rl_policies.iam import _own_principals
from policy.tpu_rl_policies.resources import CONFIG_MAP, DEPLOYMENT, Resource
from policy.tpu_rl_policies.scripts import LAUNCHED_BY, trainer_runs, training_run
from tests.launcher_stack import LAUNCHER_TEXT, NAMESPACE, RUN

pytestmark = pytest.mark.pure

MODEL = model_for_maxtext("gemma4-26b")
ACCOUNT = "gcp:serviceaccount/account:Account"
KSA = "kubernetes:core/v1:ServiceAccount"


def _literal(value: str) -> EnvValue:
    return EnvValue(value, "literal", "literal")


def _run() -> TrainingRun:
    """``RUN``'s run."""
    assert MODEL is not None
    return TrainingRun(model=MODEL.name, num_batches=7, batch_size=4, num_generations=2, max_target_length=1024)


def _config_map(name: str, data: dict[str, str]) -> Resource:
    props = {"metadata": {"name": name, "namespace": NAMESPACE}, "data": data}
    return Resource(CONFIG_MAP, props, f"urn:{name}", name)


def _runs(mounted: dict[str, dict[str, str]], command: list[str]) -> list[TrainingRun | str]:
    """The runs of a container that runs ``command`` with each ConfigMap of ``mounted`` (mount path -> its data)
    mounted as a volume."""
    maps = [_config_map(f"scripts-{i}", data) for i, data in enumerate(mounted.values())]
    spec = {"volumes": [{"name": m.name, "configMap": {"name": m.name}} for m in maps]}
    container = {"volumeMounts": [{"name": m.name, "mountPath": path} for m, path in zip(maps, mounted, strict=True)]}
    objects = StackObjects(maps)
    mounts = Mounts(spec, container, NAMESPACE, objects)
    return trainer_runs(command, container_env(container, NAMESPACE, objects), mounts).runs


@pytest.mark.parametrize(
    ("mounted", "where"),
    [
        pytest.param({"/opt/tpu-rl": {LAUNCHER: LAUNCHER_TEXT}}, "no file", id="no volume at the overrides' folder"),
        pytest.param(
            {"/opt/tpu-rl": {LAUNCHER: LAUNCHER_TEXT}, "/tpu-rl": {"run.sh": "true\n"}},
            "a volume of ConfigMap scripts-1 without that file",
            id="a volume there without the file",
        ),
    ],
)
def test_a_launcher_without_its_overrides_file_is_a_run_that_says_where_it_looked(
    mounted: dict[str, dict[str, str]], where: str
) -> None:
    """The launcher reads its overrides at ``CONFIG_PATH`` whatever its own path: where nothing is mounted there the
    run cannot be read, and the line says there is no file rather than naming a volume."""
    runs = _runs(mounted, ["python3", f"/opt/tpu-rl/{LAUNCHER}"])
    assert runs == [f"cannot read {CONFIG_PATH} ({where}), which {LAUNCHED_BY} reads"]


def test_a_launcher_beside_its_overrides_file_is_the_run_they_make() -> None:
    """The contrast of the lines above: the same launcher, with ``train.json`` mounted where it reads it."""
    data = {LAUNCHER: LAUNCHER_TEXT, CONFIG_FILE: config_text(f"{k}={v}" for k, v in RUN.items())}
    assert _runs({"/tpu-rl": data}, ["python3", f"/tpu-rl/{LAUNCHER}"]) == [_run()]


@pytest.mark.parametrize(
    ("overrides", "env", "expected"),
    [
        pytest.param({**RUN, "model_name": ""}, {}, "cannot read model_name=", id="an empty model name"),
        pytest.param(
            {**RUN, "num_batches.extra": "1"},
            {},
            "cannot read num_batches= beside num_batches.extra=",
            id="a child of a run key",
        ),
        pytest.param(
            {k: v for k, v in RUN.items() if k != "rl.num_generations"},
            {"M_RL.NUM_GENERATIONS": _literal("8")},
            "cannot read rl.num_generations= as a positive integer",
            id="a dotted key is never read from the environment",
        ),
    ],
)
def test_run_keys_the_policy_cannot_read(overrides: dict[str, str], env: dict[str, EnvValue], expected: str) -> None:
    """An empty model name names no model; a key that sets a run key's child hides the value train_rl gets; MaxText's
    pyconfig reads ``M_<KEY>`` for a top-level key only (a dotted key has no variable)."""
    assert training_run(overrides, env) == expected


@pytest.mark.parametrize(
    ("paths", "path", "count"),
    [
        pytest.param(["/", "/tpu-rl"], CONFIG_PATH, 2, id="the root covers every path"),
        pytest.param(["/"], "/", 1, id="the root covers itself"),
        pytest.param(["/tpu-rl", "/tpu-rl/X"], CONFIG_PATH, 1, id="a folder inside the path's folder does not"),
        pytest.param(["/tpu-rlX", "/tpu-rl"], CONFIG_PATH, 1, id="a folder sharing the prefix does not"),
        pytest.param(["/tpu-rl/", "/tpu-rl/train.json"], CONFIG_PATH, 2, id="the folder and the file"),
        pytest.param(["/tpu-rl ", "/tpu-rl"], CONFIG_PATH, 1, id="a path with a trailing space is another folder"),
    ],
)
def test_the_volume_mounts_covering_a_path(paths: list[str], path: str, count: int) -> None:
    """A mount covers its own path and every path below it, never a sibling whose name merely starts the same."""
    container = {"volumeMounts": [{"name": f"v{i}", "mountPath": p} for i, p in enumerate(paths)]}
    assert Mounts({}, container, NAMESPACE, StackObjects([])).covering(path) == count


def _principals() -> tuple[dict[str, str], set[tuple[str, str]]]:
    """The own principals of a stack with one account of each spelling and two Kubernetes service accounts."""

    def account(name: str, **props: Any) -> Resource:
        return Resource(ACCOUNT, props, f"urn:{name}", name)

    def ksa(name: str, namespace: str) -> Resource:
        return Resource(KSA, {"metadata": {"name": name, "namespace": namespace}}, f"urn:{name}", name)

    return _own_principals(
        [
            account("derived", accountId="train", project="p"),
            account("by-email", accountId="export", email="export@q.iam.gserviceaccount.com"),
            account("email-wins", accountId="publish", project="p", email="pub@r.iam.gserviceaccount.com"),
            account("no-project", accountId="loose"),
            account("no-id", project="p"),
            ksa("in-default", "tpu-rl"),
            ksa("in-ml", "ml"),
        ]
    )


def test_the_stacks_google_accounts_by_email() -> None:
    """An account's email where the engine has it (whatever its project), else the one its id and project make;
    one with neither is none of the stack's."""
    emails, _ = _principals()
    assert emails == {
        "train@p.iam.gserviceaccount.com": "train",
        "export@q.iam.gserviceaccount.com": "export",
        "pub@r.iam.gserviceaccount.com": "publish",
    }


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param({}, {("tpu-rl", "in-default")}, id="the default namespace"),
        pytest.param({"tpu-rl:namespace": "ml"}, {("ml", "in-ml")}, id="the configured namespace"),
        pytest.param({"tpu-rl:namespace": ""}, {("tpu-rl", "in-default")}, id="an empty namespace is the default"),
    ],
)
def test_the_stacks_kubernetes_service_accounts_are_those_in_its_namespace(
    monkeypatch: pytest.MonkeyPatch, config: dict[str, str], expected: set[tuple[str, str]]
) -> None:
    monkeypatch.setattr(DEPLOYMENT, "config", config)
    assert _principals()[1] == expected
