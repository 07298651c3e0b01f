"""Typed stack configuration, validated before any resource is registered.

``load_settings`` turns the raw stack config (full key -> value, as the Pulumi
CLI hands it to the program: strings, with objects as JSON) into frozen
dataclasses. Every problem raises ``ConfigError`` with one line naming the full
key, the bad value and what is allowed. Defaults reproduce the reference
tutorial; ``Pulumi.yaml`` declares the same defaults (a test keeps them equal).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from infra.machine_shapes import machine_shape
from infra.tpu_catalogue import CATALOGUE, DEFAULT_TOPOLOGY, DEFAULT_VERSION, SliceShape, resolve_slice
from workloads.knobs import DATASETS, OPTIMIZERS, TRAINING_KNOBS, KnobValue
from workloads.models import DEFAULT_MODEL, MODELS, Model

PROJECT = "tpu-rl"

CAPACITY_MODES = ("reservation", "spot", "flex-start", "on-demand")

DEFAULT_IMAGES = {
    "maxtext": "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4",
    # Digests pinned by MaxText's own v6e-32 Gemma 4 RL recipe.
    "pathwaysServer": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server@sha256:"
    "d03068b39a8a2fab0621086ccb7c9445ce17ad34f1520159ca4ecd395346a162",
    "pathwaysProxy": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server@sha256:"
    "6342a3cae2818d2f887d396e9ae4156b3316f79fef186d71ff16d535b44e1724",
}

DEFAULT_JOBSET_VERSION = "0.10.1"  # what Cluster Toolkit installs
DEFAULT_TIMEOUTS = {"convert": "4h", "train": "24h", "export": "4h"}

# What the Pathways head pod requests (proxy + resource manager + workload container).
HEAD_REQUEST_VCPU = 32
HEAD_REQUEST_GIB = 196

# Keys of the tpu-rl namespace this program reads; anything else is a typo.
PROJECT_KEYS = (
    "clusterName",
    "bucketName",
    "authorizedNetworks",
    "tpu",
    "systemPool",
    "cpuPool",
    "protect",
    "forceDestroy",
    "namespace",
    "hfToken",
    "model",
    "images",
    "training",
    "workflow",
)


SECRET_KEYS = ("hfToken",)
"""Keys that must be stored as Pulumi secrets."""


class ConfigError(ValueError):
    """A stack setting is invalid; the message is one line naming key, value and what is allowed."""


def _error(key: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"{key} = {json.dumps(value)} is invalid: {allowed}")


# ---------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class TpuSettings:
    version: str
    machine_type: str
    topology: str
    slices: int
    capacity: str
    reservation: str | None

    @property
    def autoscaled(self) -> bool:
        return self.capacity != "reservation"


@dataclass(frozen=True)
class PoolSettings:
    machine_type: str
    min_nodes: int
    max_nodes: int
    disk_size_gb: int


@dataclass(frozen=True)
class ModelSettings:
    spec: Model
    revision: str


@dataclass(frozen=True)
class ImageSettings:
    maxtext: str
    pathways_server: str
    pathways_proxy: str


@dataclass(frozen=True)
class TrainingSettings:
    knobs: dict[str, KnobValue]
    """MaxText key -> value, for every knob in ``TRAINING_KNOBS`` (tutorial order)."""
    optimizer: str
    dataset: str
    extra_args: dict[str, str]


@dataclass(frozen=True)
class WorkflowSettings:
    enabled: bool
    preflight: bool
    max_restarts: int
    timeouts: dict[str, str]
    jobset_version: str


@dataclass(frozen=True)
class Settings:
    """Everything the program needs, validated."""

    stack: str
    project: str
    region: str
    zone: str
    cluster_name: str
    bucket_name: str
    authorized_networks: tuple[str, ...]
    tpu: TpuSettings
    slice: SliceShape
    system_pool: PoolSettings
    cpu_pool: PoolSettings
    protect: bool
    force_destroy: bool
    namespace: str
    hf_token_set: bool
    model: ModelSettings
    images: ImageSettings
    training: TrainingSettings
    workflow: WorkflowSettings
    labels: dict[str, str]
    """Cost-attribution labels put on every labelable GCP resource."""

    @property
    def total_chips(self) -> int:
        return self.slice.chips * self.tpu.slices


# ---------------------------------------------------------------------------------------------
# Field readers


class _Object:
    """Reads typed fields of one object-valued key and rejects unknown fields."""

    def __init__(self, key: str, raw: Any, known: tuple[str, ...]) -> None:
        if raw is None:
            raw = {}
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError:
                raise _error(key, raw, "expected an object (set fields with `pulumi config set --path`)") from None
        if not isinstance(raw, dict):
            raise _error(key, raw, "expected an object (set fields with `pulumi config set --path`)")
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise _error(f"{key}.{unknown[0]}", raw[unknown[0]], f"unknown field; known fields: {', '.join(known)}")
        self.key = key
        self.raw = raw

    def has(self, name: str) -> bool:
        return self.raw.get(name) not in (None, "")

    def get(self, name: str, default: Any, parse: Callable[[str, Any], Any]) -> Any:
        """The parsed field, or ``default`` when it is absent or empty (as after `--set key=`)."""
        value = self.raw.get(name)
        return default if value in (None, "") else parse(f"{self.key}.{name}", value)


def _as_str(key: str, value: Any) -> str:
    if isinstance(value, (dict, list, bool)):
        raise _error(key, value, "expected a string")
    return str(value)


def _as_int(key: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool):
        raise _error(key, value, "expected an integer")
    try:
        number = int(str(value), 10)
    except ValueError:
        raise _error(key, value, "expected an integer") from None
    if minimum is not None and number < minimum:
        raise _error(key, value, f"must be at least {minimum}")
    if maximum is not None and number > maximum:
        raise _error(key, value, f"must be at most {maximum}")
    return number


def _as_float(key: str, value: Any, minimum: float | None = None, maximum: float | None = None) -> float:
    if isinstance(value, bool):
        raise _error(key, value, "expected a number")
    try:
        number = float(str(value))
    except ValueError:
        raise _error(key, value, "expected a number") from None
    if minimum is not None and number < minimum:
        raise _error(key, value, f"must be at least {minimum}")
    if maximum is not None and number > maximum:
        raise _error(key, value, f"must be at most {maximum}")
    return number


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in ("true", "false"):
        return text == "true"
    raise _error(key, value, "expected true or false")


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    text = _as_str(key, value)
    if text not in choices:
        raise _error(key, value, f"expected one of {', '.join(choices)}")
    return text


def _matching(pattern: str, allowed: str) -> Callable[[str, Any], str]:
    regex = re.compile(pattern)

    def parse(key: str, value: Any) -> str:
        text = _as_str(key, value)
        if not regex.fullmatch(text):
            raise _error(key, value, allowed)
        return text

    return parse


_PROJECT_ID = _matching(r"[a-z][a-z0-9-]{4,28}[a-z0-9]", "a project id: 6-30 lowercase letters, digits, hyphens")
_REGION = _matching(r"[a-z]+-[a-z]+[0-9]+", "a region such as us-east5")
_CLUSTER_NAME = _matching(
    r"[a-z]([a-z0-9-]{0,18}[a-z0-9])?",
    "a lowercase letter first, then lowercase letters, digits or hyphens, at most 20 characters, no trailing hyphen",
)
_DNS_LABEL = _matching(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a DNS-1123 label (lowercase letters, digits, hyphens)")
_MACHINE_TYPE = _matching(r"[a-z][a-z0-9]*-[a-z0-9-]+", "a Compute Engine machine type such as n2-standard-64")
_RESERVATION = _matching(
    r"([a-z]([-a-z0-9]{0,61}[a-z0-9])?)|(projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/[a-z]([-a-z0-9]{0,61}[a-z0-9])?)",
    "a reservation name, or projects/PROJECT/reservations/NAME for a shared reservation",
)
_REVISION = _matching(
    r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}", "a branch, tag or 40-character commit of the model repository"
)
_DURATION = _matching(r"(?=\d)(\d+h)?(\d+m)?(\d+s)?", "a duration such as 90m, 4h or 1h30m")


def _bucket_name(key: str, value: Any) -> str:
    text = _as_str(key, value)
    allowed = (
        "3-63 lowercase letters, digits, hyphens or underscores, starting and ending with a letter or digit, "
        'not starting with "goog" and not containing "google"'
    )
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]", text):
        raise _error(key, value, allowed)
    if text.startswith("goog") or "google" in text or "g00gle" in text:
        raise _error(key, value, allowed)
    return text


def _image(key: str, value: Any) -> str:
    text = _as_str(key, value)
    if not re.fullmatch(r"[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})", text):
        raise _error(key, value, "an image reference with a tag or an @sha256 digest")
    if text.endswith(":latest"):
        raise _error(key, value, ":latest is not reproducible; pin a version tag or an @sha256 digest")
    return text


def _cidr(key: str, value: Any) -> str:
    text = _as_str(key, value)
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError:
        raise _error(key, value, "a CIDR block such as 203.0.113.0/24 (host bits zero)") from None
    if network.version != 4:
        raise _error(key, value, "an IPv4 CIDR block (GKE authorized networks are IPv4)")
    return text


def _json_value(key: str, raw: Any) -> Any:
    if isinstance(raw, str) and raw[:1] in ("[", "{"):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise _error(key, raw, "malformed JSON") from None
    return raw


# ---------------------------------------------------------------------------------------------
# Sections


def _load_tpu(raw: Any, project: str) -> tuple[TpuSettings, SliceShape]:
    key = f"{PROJECT}:tpu"
    obj = _Object(key, raw, ("version", "machineType", "topology", "slices", "capacity", "reservation"))
    version_name = obj.get("version", DEFAULT_VERSION, lambda k, v: _choice(k, v, tuple(CATALOGUE)))
    version = CATALOGUE[version_name]
    machine_name = obj.get("machineType", version.default_machine_type, _as_str)
    machine = version.machine(machine_name)
    if machine is None:
        raise _error(
            f"{key}.machineType",
            machine_name,
            f"TPU {version_name} machine types are {', '.join(m.name for m in version.machine_types)}",
        )
    if machine.multi_host_capable:
        topology = obj.get("topology", DEFAULT_TOPOLOGY[machine.name], _as_str)
        if topology not in machine.multi_host_topologies:
            hint = (
                f"{topology} is a single-host slice and GKE rejects a topology on single-host pools; "
                if topology == machine.single_host_topology
                else ""
            )
            raise _error(
                f"{key}.topology",
                topology,
                f"{hint}valid topologies of {machine.name} are {', '.join(machine.multi_host_topologies)}",
            )
    else:
        topology = machine.single_host_topology
        if obj.has("topology") and obj.raw["topology"] != topology:
            raise _error(
                f"{key}.topology",
                obj.raw["topology"],
                f"{machine.name} is single-host: it forms only {topology}; omit the topology",
            )
    slices = obj.get("slices", 1, lambda k, v: _as_int(k, v, 1, 64))
    capacity = obj.get("capacity", "reservation", lambda k, v: _choice(k, v, CAPACITY_MODES))
    reservation = obj.get("reservation", None, _RESERVATION)
    if capacity == "reservation" and reservation is None:
        raise _error(
            f"{key}.reservation", None, "required with capacity reservation (the name of a specific reservation)"
        )
    if capacity != "reservation" and reservation is not None:
        raise _error(f"{key}.reservation", reservation, f"only allowed with capacity reservation, not {capacity}")
    if reservation is not None and not reservation.startswith("projects/"):
        reservation = f"projects/{project}/reservations/{reservation}"
    settings = TpuSettings(version_name, machine_name, topology, slices, capacity, reservation)
    return settings, resolve_slice(version_name, machine_name, topology)


def _load_pool(name: str, raw: Any, defaults: PoolSettings, min_floor: int) -> PoolSettings:
    key = f"{PROJECT}:{name}"
    obj = _Object(key, raw, ("machineType", "minNodes", "maxNodes", "diskSizeGb"))
    machine = obj.get("machineType", defaults.machine_type, _MACHINE_TYPE)
    min_nodes = obj.get("minNodes", defaults.min_nodes, lambda k, v: _as_int(k, v, min_floor, 1000))
    max_nodes = obj.get("maxNodes", defaults.max_nodes, lambda k, v: _as_int(k, v, 1, 1000))
    if max_nodes < min_nodes:
        raise _error(f"{key}.maxNodes", max_nodes, f"must be at least minNodes ({min_nodes})")
    disk = obj.get("diskSizeGb", defaults.disk_size_gb, lambda k, v: _as_int(k, v, 50, 65536))
    return PoolSettings(machine, min_nodes, max_nodes, disk)


SYSTEM_POOL_DEFAULTS = PoolSettings("e2-standard-8", 2, 10, 200)
CPU_POOL_DEFAULTS = PoolSettings("n2-standard-64", 0, 4, 500)


def _load_model(raw: Any) -> ModelSettings:
    obj = _Object(f"{PROJECT}:model", raw, ("name", "revision"))
    name = obj.get("name", DEFAULT_MODEL, lambda k, v: _choice(k, v, tuple(MODELS)))
    revision = obj.get("revision", "main", _REVISION)
    return ModelSettings(MODELS[name], revision)


def _load_images(raw: Any) -> ImageSettings:
    obj = _Object(f"{PROJECT}:images", raw, tuple(DEFAULT_IMAGES))
    values = {name: obj.get(name, default, _image) for name, default in DEFAULT_IMAGES.items()}
    return ImageSettings(values["maxtext"], values["pathwaysServer"], values["pathwaysProxy"])


def _load_training(raw: Any) -> TrainingSettings:
    key = f"{PROJECT}:training"
    fields = tuple(k.field for k in TRAINING_KNOBS) + ("optimizer", "dataset", "extraArgs")
    obj = _Object(key, raw, fields)
    knobs: dict[str, KnobValue] = {}
    for knob in TRAINING_KNOBS:
        if knob.choices:

            def parse(k: str, v: Any, knob=knob) -> KnobValue:
                return _choice(k, v, knob.choices)
        elif knob.kind is bool:
            parse = _as_bool
        elif knob.kind is int:

            def parse(k: str, v: Any, knob=knob) -> KnobValue:
                return _as_int(k, v, knob.minimum, knob.maximum)  # type: ignore[arg-type]
        else:

            def parse(k: str, v: Any, knob=knob) -> KnobValue:
                return _as_float(k, v, knob.minimum, knob.maximum)

        knobs[knob.key] = obj.get(knob.field, knob.default, parse)
    optimizer = obj.get("optimizer", "adafactor", lambda k, v: _choice(k, v, OPTIMIZERS))
    dataset = obj.get("dataset", "openmathinstruct2", lambda k, v: _choice(k, v, tuple(DATASETS)))
    extra = _json_value(f"{key}.extraArgs", obj.raw.get("extraArgs")) or {}
    if not isinstance(extra, dict):
        raise _error(f"{key}.extraArgs", extra, "an object of MaxText key: value pairs")
    extra_args: dict[str, str] = {}
    reserved = {k.key for k in TRAINING_KNOBS} | RESERVED_TRAIN_KEYS
    for name, value in extra.items():
        full = f"{key}.extraArgs.{name}"
        if not re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?", name):
            raise _error(full, value, "MaxText keys are lowercase snake_case, e.g. eval_interval")
        if name in reserved:
            raise _error(full, value, "this key is set by the program; use the typed field or model/dataset settings")
        if isinstance(value, (dict, list)) or value is None:
            raise _error(full, value, "expected a scalar value")
        text = json.dumps(value) if isinstance(value, bool) else str(value)
        if not re.fullmatch(r"[A-Za-z0-9_.,:/=+@%*-]+", text):
            raise _error(full, value, "values may use letters, digits and _ . , : / = + @ % * - only")
        extra_args[name] = text
    _check_training(key, knobs)
    return TrainingSettings(knobs, optimizer, dataset, dict(sorted(extra_args.items())))


# Keys the train step sets itself (paths, model, dataset, token handling).
RESERVED_TRAIN_KEYS = frozenset(
    {
        "run_name",
        "base_output_directory",
        "model_name",
        "scan_layers",
        "load_parameters_path",
        "hf_access_token",
        "data_template_path",
        "tokenizer_path",
        "vllm_hf_overrides",
        "vllm_additional_config",
        "dataset_name",
        "eval_dataset_name",
        "hf_train_files",
        "train_split",
    }
)


def _check_training(key: str, knobs: dict[str, KnobValue]) -> None:
    batch, micro = int(knobs["batch_size"]), int(knobs["train_micro_batch_size"])
    if batch % micro:
        raise _error(f"{key}.trainMicroBatchSize", micro, f"must divide batchSize ({batch})")
    if int(knobs["max_prefill_predict_length"]) >= int(knobs["max_target_length"]):
        raise _error(
            f"{key}.maxPrefillPredictLength",
            knobs["max_prefill_predict_length"],
            f"must be below maxTargetLength ({knobs['max_target_length']})",
        )
    trainer, sampler = float(knobs["trainer_devices_fraction"]), float(knobs["sampler_devices_fraction"])
    if trainer <= 0 or sampler <= 0 or trainer + sampler > 1.0 + 1e-9:
        raise _error(
            f"{key}.samplerDevicesFraction",
            sampler,
            f"trainer and sampler fractions must be positive and sum to at most 1 (trainer is {trainer})",
        )


def _check_meshes(key: str, knobs: dict[str, KnobValue], chips: int) -> None:
    """The rollout and trainer meshes must tile the chips each side gets."""
    trainer_chips = int(chips * float(knobs["trainer_devices_fraction"]))
    sampler_chips = int(chips * float(knobs["sampler_devices_fraction"]))
    rollout = int(knobs["rollout_tensor_parallelism"]) * int(knobs["rollout_expert_parallelism"])
    if sampler_chips < 1 or sampler_chips % rollout:
        raise _error(
            f"{key}.rolloutTensorParallelism",
            knobs["rollout_tensor_parallelism"],
            f"rollout TP x EP ({rollout}) must divide the sampler's {sampler_chips} chips "
            f"({chips} chips x samplerDevicesFraction)",
        )
    ici = int(knobs["ici_tensor_parallelism"]) * int(knobs["ici_expert_parallelism"])
    fsdp = int(knobs["ici_fsdp_parallelism"])
    if fsdp == 0:
        raise _error(f"{key}.iciFsdpParallelism", fsdp, "use -1 (fill the remaining chips) or a positive size")
    mesh = ici * fsdp if fsdp > 0 else ici
    fits = trainer_chips >= 1 and (trainer_chips == mesh if fsdp > 0 else trainer_chips % ici == 0)
    if not fits:
        raise _error(
            f"{key}.iciExpertParallelism",
            knobs["ici_expert_parallelism"],
            f"the ICI mesh tensor x expert x fsdp ({knobs['ici_tensor_parallelism']} x "
            f"{knobs['ici_expert_parallelism']} x {fsdp}) must tile the trainer's {trainer_chips} chips",
        )


def _load_workflow(raw: Any) -> WorkflowSettings:
    key = f"{PROJECT}:workflow"
    obj = _Object(key, raw, ("enabled", "preflight", "maxRestarts", "timeouts", "jobsetVersion"))
    enabled = obj.get("enabled", True, _as_bool)
    preflight = obj.get("preflight", True, _as_bool)
    max_restarts = obj.get("maxRestarts", 0, lambda k, v: _as_int(k, v, 0, 5))
    timeouts_obj = _Object(f"{key}.timeouts", obj.raw.get("timeouts"), tuple(DEFAULT_TIMEOUTS))
    timeouts = {step: timeouts_obj.get(step, default, _DURATION) for step, default in DEFAULT_TIMEOUTS.items()}
    jobset_version = obj.get(
        "jobsetVersion", DEFAULT_JOBSET_VERSION, _matching(r"\d+\.\d+\.\d+", "a JobSet chart version such as 0.10.1")
    )
    return WorkflowSettings(enabled, preflight, max_restarts, timeouts, jobset_version)


def _check_cpu_pool(pool: PoolSettings, model: Model) -> None:
    key = f"{PROJECT}:cpuPool"
    if pool.max_nodes < 1:
        raise _error(f"{key}.maxNodes", pool.max_nodes, "the workflow needs at least 1 CPU node")
    shape = machine_shape(pool.machine_type)
    if shape is None:
        return  # custom shapes: size is not known, GKE will tell
    need_vcpu = HEAD_REQUEST_VCPU + 2
    need_gib = max(HEAD_REQUEST_GIB, model.cpu_step_memory_gib) * 1.1
    if shape.vcpus < need_vcpu or shape.memory_gib < need_gib:
        raise _error(
            f"{key}.machineType",
            pool.machine_type,
            f"{shape.vcpus} vCPU / {shape.memory_gib:g} GiB is too small: the Pathways head requests "
            f"{HEAD_REQUEST_VCPU} vCPU / {HEAD_REQUEST_GIB} GiB and {model.name} conversion "
            f"{model.cpu_step_memory_gib} GiB; use n2-standard-64 or larger",
        )


# ---------------------------------------------------------------------------------------------
# Entry point


def load_settings(raw: Mapping[str, Any], stack: str, secret_keys: frozenset[str] = frozenset()) -> Settings:
    """Validate the raw stack config (full key -> value) and return typed Settings."""
    unknown = sorted(k for k in raw if k.startswith(f"{PROJECT}:") and k.split(":", 1)[1] not in PROJECT_KEYS)
    if unknown:
        raise _error(unknown[0], "(set)", f"unknown key; known keys: {', '.join(PROJECT_KEYS)}")

    def get(name: str) -> Any:
        full = name if ":" in name else f"{PROJECT}:{name}"
        return _json_value(full, raw.get(full))

    def required(full: str, parse: Callable[[str, Any], Any]) -> Any:
        value = raw.get(full)
        if value in (None, ""):
            raise _error(full, None, f"required; set it with `pulumi config set {full} VALUE`")
        return parse(full, value)

    project = required("gcp:project", _PROJECT_ID)
    region = required("gcp:region", _REGION)
    zone = required("gcp:zone", _matching(r"[a-z]+-[a-z]+[0-9]+-[a-z]", "a zone such as us-east5-b"))
    if zone.rsplit("-", 1)[0] != region:
        raise _error("gcp:zone", zone, f"must be a zone of gcp:region {region} (e.g. {region}-b)")

    cluster_name = _CLUSTER_NAME(f"{PROJECT}:clusterName", get("clusterName") or "tpu-rl")
    bucket_raw = get("bucketName")
    bucket_name = _bucket_name(
        f"{PROJECT}:bucketName", bucket_raw if bucket_raw not in (None, "") else f"{project}-{cluster_name}"
    )
    networks_raw = get("authorizedNetworks")
    if networks_raw is None:
        networks_raw = ["0.0.0.0/0"]
    if not isinstance(networks_raw, list) or not networks_raw:
        raise _error(
            f"{PROJECT}:authorizedNetworks", networks_raw, "a non-empty list of CIDRs that may reach the control plane"
        )
    networks = tuple(_cidr(f"{PROJECT}:authorizedNetworks[{i}]", v) for i, v in enumerate(networks_raw))

    tpu, slice_shape = _load_tpu(get("tpu"), project)
    system_pool = _load_pool("systemPool", get("systemPool"), SYSTEM_POOL_DEFAULTS, 1)
    cpu_pool = _load_pool("cpuPool", get("cpuPool"), CPU_POOL_DEFAULTS, 0)
    protect = _as_bool(f"{PROJECT}:protect", get("protect") or False)
    force_destroy = _as_bool(f"{PROJECT}:forceDestroy", get("forceDestroy") or False)
    namespace = _DNS_LABEL(f"{PROJECT}:namespace", get("namespace") or "tpu-rl")
    if namespace.startswith("kube-") or namespace in ("default", "jobset-system"):
        raise _error(f"{PROJECT}:namespace", namespace, "use a namespace of its own, not a system one")

    model = _load_model(get("model"))
    images = _load_images(get("images"))
    training = _load_training(get("training"))
    workflow = _load_workflow(get("workflow"))

    token_key = f"{PROJECT}:hfToken"
    token = raw.get(token_key)
    hf_token_set = token not in (None, "")
    if hf_token_set and token_key not in secret_keys:
        # The value itself is never echoed.
        raise ConfigError(
            f"{token_key} is stored in plain text: remove it and set it again with "
            "`pulumi config set --secret tpu-rl:hfToken`"
        )
    if workflow.enabled:
        if not hf_token_set:
            raise _error(
                token_key,
                None,
                "required while tpu-rl:workflow.enabled is true; set it with "
                "`pulumi config set --secret tpu-rl:hfToken` (a Hugging Face read token)",
            )
        _check_cpu_pool(cpu_pool, model.spec)
        _check_meshes(f"{PROJECT}:training", training.knobs, slice_shape.chips * tpu.slices)

    labels = {"app": PROJECT, "stack": _label_value(stack), "cluster": cluster_name, "managed-by": "pulumi"}
    return Settings(
        stack=stack,
        project=project,
        region=region,
        zone=zone,
        cluster_name=cluster_name,
        bucket_name=bucket_name,
        authorized_networks=networks,
        tpu=tpu,
        slice=slice_shape,
        system_pool=system_pool,
        cpu_pool=cpu_pool,
        protect=protect,
        force_destroy=force_destroy,
        namespace=namespace,
        hf_token_set=hf_token_set,
        model=model,
        images=images,
        training=training,
        workflow=workflow,
        labels=labels,
    )


EXAMPLE_PROJECTS = ("my-tpu-dev-project", "my-tpu-prod-project")
EXAMPLE_RESERVATION = "my-v6e-32-reservation"
DOCUMENTATION_NETWORKS = tuple(ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"))


def placeholder_problems(settings: Settings) -> list[str]:
    """Values copied from the example stacks that cannot work in a real deployment."""
    problems = []
    if settings.project in EXAMPLE_PROJECTS:
        problems.append(f"gcp:project is the example placeholder {settings.project!r}: set your project id")
    if settings.tpu.reservation and settings.tpu.reservation.endswith(f"/{EXAMPLE_RESERVATION}"):
        problems.append(f"tpu-rl:tpu.reservation is the example placeholder {EXAMPLE_RESERVATION!r}")
    for cidr in settings.authorized_networks:
        network = ipaddress.ip_network(cidr)
        if any(network.subnet_of(doc) for doc in DOCUMENTATION_NETWORKS):
            problems.append(f"tpu-rl:authorizedNetworks has the documentation range {cidr}: set the networks you use")
    return problems


def _label_value(text: str) -> str:
    """A GCP label value: lowercase letters, digits, underscores and hyphens, at most 63."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]
