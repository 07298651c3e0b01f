"""The steps' argv and the bash scripts that run them (plain functions, no Pulumi), train_rl's split over two slices
among them (``disaggregated``, and what a plan of two says: ``slice_warnings``).

The Hugging Face token is never an argument: MaxText (0.2.5 ``configs/pyconfig.py``) reads ``HF_TOKEN`` from the
environment when ``hf_access_token`` is not passed, and the container gets ``HF_TOKEN`` from a Kubernetes Secret.

No script or program is an argument: each step's bash script (``RUN_SCRIPT``) and the Python programs it runs
(``program_file``) reach its container as files of a ConfigMap mounted at ``SCRIPTS_DIR`` (``step_files``;
``workloads.specs.step_manifests.scripts_config_map``), and the container runs ``bash /tpu-rl/run.sh``. Linux caps
one argument at 128 KiB (``MAX_ARG_STRLEN``) and a container's whole argv and environment at a quarter of its
stack limit (``execve(2)``); the export's script alone is about 72 KB as a ``bash -c`` argument, more than half of
the one argument's cap.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import shlex
from pathlib import Path

from core.knobs import DATASETS, TRAINING_KNOBS, Dataset
from core.layout import RUN_NAME, STAGED_DATASET
from core.maxtext_keys import pinned_record
from core.names import SETUP_FAILURE_EXIT
from core.settings import Settings
from core.step_config import CONFIG_FILE, config_text

TO_MAXTEXT = "maxtext.checkpoint_conversion.to_maxtext"
TRAIN_RL = "maxtext.trainers.post_train.rl.train_rl"
TO_HUGGINGFACE = "maxtext.checkpoint_conversion.to_huggingface"

UTILS_RL = "/deps/src/maxtext/trainers/post_train/rl/utils_rl.py"

SCRIPTS_DIR = "/tpu-rl"
"""Where a step's ConfigMap of scripts is mounted, read-only: its bash script and the programs it runs."""
RUN_SCRIPT = "run.sh"
"""The step's bash script in ``SCRIPTS_DIR``: the container's command is ``bash /tpu-rl/run.sh``."""
_PROGRAM_FILE = re.compile(re.escape(SCRIPTS_DIR) + r"/([a-z_]+[.]py)\b")


def run_program(file_name: str) -> str:
    """The words of a script line that runs the program ``file_name`` of the step's ConfigMap (``program_file``).

    ``python3 <file>`` puts the file's folder, ``SCRIPTS_DIR``, first on ``sys.path``: a program imports the image's
    packages, the standard library and another program of the same ConfigMap (``program_imports``)."""
    return f"python3 {SCRIPTS_DIR}/{file_name}"


MAXTEXT_CHECK = "maxtext_check.py"
"""The program each MaxText step runs first: the image's MaxText against the adopted wheel's RECORD
(``workloads/container/maxtext_check.py``), with the pin inlined (``with_pin``)."""
PIN_START = "# tpu-rl: the adopted MaxText's RECORD is inlined here (workloads/specs/commands.py)\n"
PIN_END = "# tpu-rl: end of the adopted MaxText's RECORD\n"


def with_pin(source: str, pin: dict[str, object]) -> str:
    """``source`` with ``pin`` (``core.maxtext_keys.pinned_record``) as base64 of its JSON between ``PIN_START`` and
    ``PIN_END``, in 76-character lines (``base64.encodebytes``): bytes that depend on the pin alone."""
    packed = base64.encodebytes(json.dumps(pin, sort_keys=True, separators=(",", ":")).encode()).decode()
    start, end = source.index(PIN_START), source.index(PIN_END) + len(PIN_END)
    return f'{source[:start]}PINNED = """\n{packed}"""\n{source[end:]}'


def maxtext_check(image: str, mode: str) -> str:
    """The first line of a MaxText step's script, before any weight is read: ``MAXTEXT_CHECK`` with the image its
    manifest names (``tpu-rl:images.maxtext`` as ``up`` pinned it), shown when the check fails, and with ``warn``
    when ``tpu-rl:images.maxtextCheck`` says so (the default, ``refuse``, adds no word). ``set -e`` ends the script
    with its exit 3 (``SETUP_FAILURE_EXIT``) when it refuses: the step fails, no restart."""
    return f"{run_program(MAXTEXT_CHECK)} {shlex.quote(image)}" + (" warn" if mode == "warn" else "")


# The tutorial's AdamW -> Adafactor patch, made loud: exactly one substitution or the step fails.
OPTIMIZER_PATCH = """import pathlib, re, sys
path = pathlib.Path(sys.argv[1])
text, count = re.subn(r"optax[.]adamw[(][^)]+[)]", "optax.adafactor(learning_rate=learning_rate)", path.read_text())
if count != 1:
    print(f"optimizer patch: expected exactly one optax.adamw(...) call in {path}, found {count}; "
          "the image changed, refusing to train with an unknown optimizer", file=sys.stderr)
    sys.exit(EXIT_CODE)
path.write_text(text)
print(f"optimizer patch: {path}: optax.adamw -> optax.adafactor")
""".replace("EXIT_CODE", str(SETUP_FAILURE_EXIT))


def convert_argv(settings: Settings, output_uri: str) -> list[str]:
    """``to_maxtext`` arguments: the tutorial's, without the token, with our output path, the commit the
    conversion resolved ``tpu-rl:model.revision`` to (``COMMIT_REF``, set by ``convert_script``) and, for the Hub
    repository, the local folder ``convert_script`` filled with that commit's files (``CONVERT_BASE_DIR``: MaxText
    0.2.4's and 0.2.5's ``LazyHFLoader`` reads a local folder, ``os.path.isdir``, and asks the Hub nothing)."""
    model = settings.model.spec
    return [
        "-m",
        TO_MAXTEXT,
        f"model_name={model.maxtext_name}",
        f"base_output_directory={output_uri}",
        "scan_layers=False",
        "use_multimodal=False",
        "skip_jax_distributed_system=true",
        "checkpoint_storage_use_zarr3=0",
        "checkpoint_storage_use_ocdbt=0",
        "hardware=cpu",
        "--lazy_load_tensors=True",
        f"--revision={COMMIT_REF}",
        f"--hf_model_path={CONVERT_BASE_DIR}",
    ]


def vllm_additional_config(settings: Settings) -> str:
    """The tutorial's vLLM ``maxtext_config``, with the model and the matching knobs filled in."""
    knobs = settings.training.knobs

    def flag(value: object) -> str:
        return "true" if value else "false"

    return (
        "{'maxtext_config': {"
        f"'model_name': '{settings.model.spec.maxtext_name}', 'model_call_mode': 'inference', "
        f"'enable_dp_attention': {flag(knobs['enable_dp_attention'])}, "
        f"'allow_split_physical_axes': {flag(knobs['allow_split_physical_axes'])}, "
        "'use_ragged_sort': false, "
        f"'ragged_gather_reduce_fallback': {flag(knobs['ragged_gather_reduce_fallback'])}, "
        "'prefuse_moe_weights': true, 'weight_dtype': 'bfloat16'}}"
    )


def disaggregated(slices: int) -> dict[str, int | str]:
    """train_rl's keys that split it over ``slices``: none on one slice (its single-slice path, where the device
    fractions split the chips); on two, the trainer on the first slice and the samplers on the second (MaxText 0.2.5
    ``utils/model_creation_utils.py`` ``setup_configs_and_devices`` groups the devices by ``slice_index``), where the
    single-slice path would make both slices one mesh across the data-centre network.

    ``inference_benchmark_test=true`` makes ``utils/maxtext_utils.py`` ``create_device_mesh`` count one slice, each
    side's truth, where it would divide the side's devices by the ``num_slices`` of -1 that ``RLConfig`` sets with a
    split; its only other reader, ``maybe_initialize_jax_distributed_system``, returns before it (``post_train/rl.yml``
    sets ``skip_jax_distributed_system: true``). ``rollout_data_parallelism=1`` runs one sampler replica over its slice,
    as MaxText's multislice RL came (maxtext#2702; the data parallelism of maxtext#2713 was tested on other slices than
    these). The meshes this needs are ``core.config.finish``'s to refuse; tests/test_maxtext_meshes.py builds both with
    MaxText's code."""
    if slices == 1:
        return {}
    return {
        "num_trainer_slices": 1,
        "num_samplers_slices": slices - 1,
        "inference_benchmark_test": "true",
        "rollout_data_parallelism": 1,
    }


def slice_warnings(slices: int) -> list[str]:
    """What a plan of ``slices`` says before anything is created (one line each): two slices are experimental, with
    what is verified of them (the meshes, built by MaxText's own code) and what is not (a training run)."""
    if slices == 1:
        return []
    return [
        "tpu-rl:tpu.slices 2 is experimental: MaxText 0.2.5's own code builds its meshes (the trainer's on one slice, "
        "one sampler replica over the other: rollout_data_parallelism 1, maxtext#2702; tests/test_maxtext_meshes.py), "
        "but no training run on two slices has been seen: watch its first run (make status) before relying on it"
    ]


def train_argv(settings: Settings, input_uri: str, output_uri: str) -> list[str]:
    """``train_rl`` arguments in the tutorial's order (token removed, dataset keys added)."""
    model = settings.model.spec
    training = settings.training
    dataset = DATASETS[training.dataset]
    rendered = {k.key: f"{k.key}={k.render(training.knobs[k.key])}" for k in TRAINING_KNOBS}
    args = [
        "-m",
        TRAIN_RL,
        f"run_name={RUN_NAME}",
        f"base_output_directory={output_uri}",
        f"model_name={model.maxtext_name}",
        "scan_layers=False",
        f"load_parameters_path={input_uri}",
        f"data_template_path={dataset.template}",
        *(f"{key}={value}" for key, value in staged_dataset(dataset, output_uri)[0]),
    ]
    for knob in TRAINING_KNOBS:
        if knob.tutorial:
            args.append(rendered[knob.key])
        if knob.key == "sampler_devices_fraction":
            args.append(f"tokenizer_path={TRAIN_BASE_DIR}")
    args += [
        'vllm_hf_overrides={"architectures": ["MaxTextForCausalLM"]}',
        f"vllm_additional_config={vllm_additional_config(settings)}",
    ]
    args += [
        rendered[knob.key] for knob in TRAINING_KNOBS if not knob.tutorial and training.knobs[knob.key] != knob.omitted
    ]
    args += [f"{key}={value}" for key, value in disaggregated(settings.tpu.slices).items()]
    args += [f"{key}={value}" for key, value in training.extra_args.items()]
    return args


HUB_DATASET_FILES = re.compile(r"hf://datasets/([A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*)/(.+)")
"""A dataset key's Hub files: ``hf://datasets/<org>/<name>/<pattern>`` (``hf_train_files``, ``hf_eval_files``)."""


def staged_dataset(dataset: Dataset, output_uri: str) -> tuple[list[tuple[str, str]], tuple[str, list[str]] | None]:
    """The dataset's keys as ``train_rl`` gets them, each key of Hub files (``HUB_DATASET_FILES``) made the same
    pattern in the copy training stages under ``<output>dataset/`` on its first attempt (``base_snapshot.py
    dataset``: every later attempt reads it there, and the Hub sends each file once); and what the script stages:
    the repository and its patterns (None: the dataset names no files, ``datasets`` loads it from the Hub by name).
    MaxText's ``train_rl.get_dataset`` (0.2.4 and 0.2.5) hands the files to ``datasets.load_dataset("parquet",
    data_files=...)``, which globs a ``gs://`` pattern through gcsfs (in the image)."""
    keys, repos, patterns = [], set(), []
    for key, value in dataset.keys:
        found = HUB_DATASET_FILES.fullmatch(value)
        if found:
            repos.add(found[1])
            patterns.append(found[2])
            value = f"{output_uri}{STAGED_DATASET}{found[2]}"
        keys.append((key, value))
    if len(repos) > 1:
        raise ValueError(f"the dataset {dataset.name} names files of {len(repos)} repositories; stage one")
    return keys, (repos.pop(), patterns) if repos else None


CHECKPOINT_REF = "${checkpoint}"
"""The export's input, found at run time by ``checkpoint_scan.py`` (see ``export_script``)."""
COMMIT_REF = "${commit}"
"""The base model's commit, resolved once by the conversion and read back by training and the export
(``workloads/container/base_snapshot.py``)."""
RUN_TIME_REFS = (CHECKPOINT_REF, COMMIT_REF)
TRAIN_BASE_DIR = "/tmp/tpu-rl-base"
"""Where training keeps the base's files at the converted commit: its ``tokenizer_path`` (vLLM's model config too)."""
CONVERT_BASE_DIR = "/scratch/base-model"
"""Where the conversion keeps the base's files at the commit, weights included: ``to_maxtext``'s ``--hf_model_path``
(the step's scratch, sized for one copy of the weights: ``core.steps.scratch_gib``)."""
EXPORT_BASE_DIR = "/scratch/base"
"""Where the export keeps them: ``to_huggingface``'s ``--hf_model_path`` (the tokenizer and chat template)."""


def mark_folder(uri: str, reads: tuple[str, ...] = ()) -> str:
    """The line of a step's script that creates its output folder first (``workloads/container/mark_folder.py``),
    once each grant of the step's account is in effect: the bucket, each prefix in ``reads``, the folder.

    The folder (a zero-byte object named like it, ending in "/") comes before MaxText touches the path: MaxText opens
    gs:// paths through TensorFlow's GCS filesystem, whose mkdir walks up from the new folder and looks up each
    missing parent as an object without its "/"; with an empty output path that walk reaches <model>/<step>, outside
    the prefix the step's identity may read (infra/gcp/access.py), and GCS answers 403, which MaxText takes as a
    permission error and stops. With the folder there, the walk stops at it. And it comes first because a grant
    takes minutes to apply: the program retries each use while it is refused (docs/security.md "Cluster hardening"),
    so no fixed wait comes before the step's pods."""
    words = (uri, *reads)
    return f"{run_program('mark_folder.py')} " + " ".join(shlex.quote(word) for word in words)


# Copies a file of the attempt next to the checkpoints (best effort: never changes the step's outcome).
UPLOAD = """import sys
from google.cloud import storage
bucket, _, name = sys.argv[2][len("gs://"):].partition("/")
try:
    storage.Client().bucket(bucket).blob(name).upload_from_filename(sys.argv[1], content_type="text/plain")
    print(f"tpu-rl: copied to {sys.argv[2]}")
except Exception as err:
    print(f"tpu-rl: could not copy {sys.argv[1]} to {sys.argv[2]}: {type(err).__name__}", file=sys.stderr)
"""


def export_argv(settings: Settings, output_uri: str) -> list[str]:
    """``to_huggingface`` arguments: the tutorial's plus non-OCDBT/zarr3 reads of the RL checkpoint.

    The checkpoint is not computed from numBatches: MaxText drops long prompts and batches with
    drop_remainder, so a run can end early; the script finds the newest complete step.
    """
    return [
        "-m",
        TO_HUGGINGFACE,
        f"model_name={settings.model.spec.maxtext_name}",
        f"load_parameters_path={CHECKPOINT_REF}",
        f"base_output_directory={output_uri}",
        "skip_jax_distributed_system=true",
        "hardware=cpu",
        "scan_layers=False",
        "use_multimodal=False",
        "weight_dtype=bfloat16",
        "checkpoint_storage_use_zarr3=False",
        "checkpoint_storage_use_ocdbt=False",
        f"--hf_model_path={EXPORT_BASE_DIR}",
        "--override_model_architecture",
    ]


_SAFE_AROUND_REF = re.compile(r"[A-Za-z0-9_.,:/=+@%*-]*")


def quote(word: str) -> str:
    """Shell-quote one word; words with single quotes but nothing special to bash in double quotes
    get double quotes (as the tutorial writes ``vllm_additional_config="{'maxtext_config': ...}"``).
    A run-time reference (``RUN_TIME_REFS``: the checkpoint, the base's commit) is double-quoted so bash expands
    it (and nothing else)."""
    for ref in RUN_TIME_REFS:
        if ref in word:
            before, _, after = word.partition(ref)
            if not (_SAFE_AROUND_REF.fullmatch(before) and _SAFE_AROUND_REF.fullmatch(after)):
                raise ValueError(f"unsafe text around {ref}: {word!r}")
            return f'"{word}"'
    if "'" in word and not any(c in word for c in '"$`\\!'):
        return f'"{word}"'
    return shlex.quote(word)


def command_line(argv: list[str]) -> str:
    """``python3 <argv>`` with every word quoted."""
    return "python3 " + " ".join(quote(a) for a in argv)


def script(*lines: str, argv: list[str]) -> str:
    """A bash script: strict mode, the given lines, then ``exec python3 <argv>``."""
    body = ["set -euo pipefail", *lines, "exec " + command_line(argv)]
    return "\n".join(body) + "\n"


CONTAINER = Path(__file__).parents[1] / "container"
"""``workloads/container``: the programs a step's ConfigMap ships."""
CORE = Path(__file__).parents[2] / "core"
CORE_FILES = ("errors.py", "hf_model.py", "redact.py", "redact_keys.py", "terminal.py")
"""``core``'s standard-library modules the programs import as files of their ConfigMap (the image has no copy of
them), each by its name (``program_imports``): ``errors.py`` (the project's one error tree, under which a program's
refusal and failure are), ``hf_model.py`` (the safetensors header check, the names of a model folder's files, the
bounded GCS read and the comparison) and core's redaction (``redact.py`` and what it imports), which ``shown.py``
applies to what a step prints."""
HF_MODEL_FILE = "hf_model.py"
HF_MODEL = (CORE / HF_MODEL_FILE).read_text()
"""``core/hf_model.py`` as a step ships it (a mutation run puts the file as written here: tests/conftest.py)."""


def base_line(*words: str) -> str:
    """The script line that runs ``base_snapshot.py`` with ``words`` and keeps the commit it prints (an
    assignment is neither split nor globbed: no double quotes around ``$(...)``, which keeps the line readable
    by a reader of the script that is not bash, the policy pack's, as bash reads it)."""
    return f"commit=$({run_program('base_snapshot.py')} {' '.join(shlex.quote(w) for w in words)})"


def convert_script(settings: Settings, argv: list[str], output_uri: str, cache_root: str, shared_root: str) -> str:
    """Check the image's MaxText (``maxtext_check``), create the output folder, resolve ``tpu-rl:model.revision`` to a
    commit once and fetch that commit's files through the Hub cache into ``CONVERT_BASE_DIR`` (``shared_root``'s entry
    read first, ``cache_root``'s the one it writes), each hashed against the Hub's value, copying the base's files to
    the output (``base_snapshot.py snapshot``: a retried conversion keeps its recorded commit; the Hub sends each file
    once per commit, ``core.settings.Settings.hub_cache``), then convert the weights of that commit."""
    model = settings.model
    words = (model.spec.hf_repo, model.revision, output_uri, cache_root, CONVERT_BASE_DIR, shared_root)
    snapshot = base_line("snapshot", *words)
    check = maxtext_check(settings.images.maxtext, settings.images.maxtext_check)
    marked = mark_folder(output_uri, (cache_root, shared_root))
    return script(check, marked, snapshot, 'echo "tpu-rl: converting commit ${commit}"', argv=argv)


def export_script(  # noqa: PLR0913 (the step's paths, and the image its check names)
    argv: list[str], actor_uri: str, output_uri: str, repo: str, convert_uri: str, check: str
) -> str:
    """Check the image's MaxText (``check``: its ``maxtext_check`` line), create the output folder, find the newest
    complete checkpoint (exit 3, not retried, if there is none),
    fetch the base's files at the converted commit (``base_snapshot.py fetch``: ``to_huggingface``'s tokenizer and
    chat template), export the checkpoint, then make the export the whole base model at that commit from the cache
    objects the conversion hashed (``workloads/container/complete_export.py``, exit 3 for a refusal).

    ``workloads/container/checkpoint_scan.py``, the fetch and the completion are files of the step's ConfigMap: the
    image has no copy of them.
    """
    lines = [
        "set -euo pipefail",
        check,
        mark_folder(output_uri, (actor_uri, convert_uri)),
        f'checkpoint="$({run_program("checkpoint_scan.py")} {shlex.quote(actor_uri)})"',
        'echo "tpu-rl: exporting ${checkpoint}"',
        base_line("fetch", convert_uri, EXPORT_BASE_DIR),
        command_line(argv),
        f'exec {run_program("complete_export.py")} {shlex.quote(repo)} "{COMMIT_REF}" {shlex.quote(output_uri)} '
        + shlex.quote(convert_uri),
    ]
    return "\n".join(lines) + "\n"


def program(file_name: str) -> str:
    """The text of a step's program ``workloads/container/<file_name>`` (or ``core/hf_model.py``, ``HF_MODEL``), a
    file of the step's ConfigMap (``step_files``), as the image has no copy of it; the MaxText check with its pinned
    record."""
    if file_name == HF_MODEL_FILE:
        return HF_MODEL
    if file_name in CORE_FILES:
        return _core_source(file_name)
    source = _container_source(file_name)
    return with_pin(source, pinned_record()) if file_name == MAXTEXT_CHECK else source


@functools.cache
def _core_source(file_name: str) -> str:
    """The text of ``core/<file_name>`` (``CORE_FILES``), read once per process."""
    return (CORE / file_name).read_text()


@functools.cache  # a plan reads each program once for every step that ships it, and again for what it imports
def _container_source(file_name: str) -> str:
    """The text of ``workloads/container/<file_name>`` as the repository holds it, read once per process (a read
    alone: what decides on it, ``program`` and ``program_imports``, is left undecorated, where mutmut mutates it)."""
    return (CONTAINER / file_name).read_text()


def program_script(file_name: str, *words: str, output_uri: str, reads: tuple[str, ...] = ()) -> str:
    """A step that runs one program: create its output folder once its grants, on what it ``reads`` too, are in
    effect (``mark_folder``), then ``exec`` the program ``file_name`` (``program``, a file of the step's ConfigMap)
    with ``words``, each quoted."""
    body = [
        "set -euo pipefail",
        mark_folder(output_uri, reads),
        f"exec {run_program(file_name)} " + " ".join(shlex.quote(word) for word in words),
    ]
    return "\n".join(body) + "\n"


CARD_DIR = "/card"
"""Where the publish step's card (its ConfigMap: ``README.md``, the reward curve) is mounted."""
PUBLISH_WORK = "/scratch/publish"
PUBLISHED = "published.json"
"""The publish step's record in its output folder: repository, branch, commit."""


def publish_script(export_uri: str, output_uri: str) -> str:
    """Create the output folder, then upload the export with its card (``workloads/container/publish_hub.py``)."""
    words = (export_uri, CARD_DIR, PUBLISH_WORK, output_uri + PUBLISHED)
    return program_script("publish_hub.py", *words, output_uri=output_uri, reads=(export_uri,))


SNIPPETS: dict[str, str] = {
    "optimizer_patch.py": OPTIMIZER_PATCH,
    "upload.py": UPLOAD,
}
"""The programs a script runs that are no file of ``workloads/container`` (short ones, written here), by file name."""


def program_file(file_name: str) -> str:
    """The text of the program ``file_name`` a step's script runs: a snippet (``SNIPPETS``), or
    ``workloads/container``'s file as the image runs it (``program``). A name that is neither is a bug of a
    script's builder (``FileNotFoundError``)."""
    return SNIPPETS.get(file_name) or program(file_name)


def train_config(argv: list[str]) -> dict[str, str]:
    """The training step's overrides file (``core.step_config.CONFIG_FILE``) of its ``train_argv``: what the launcher
    passes train_rl after ``-m TRAIN_RL``, and what the policy pack reads."""
    if argv[:2] != ["-m", TRAIN_RL]:
        raise ValueError(f"not train_rl's argv: {argv[:2]}")
    return {CONFIG_FILE: config_text(argv[2:])}


_BESIDE = re.compile(r"^ +(?:import|from) ([a-z_]+)\b", re.MULTILINE)
"""A program's import of another file of its ConfigMap's folder: a bare ``import shown`` or ``from tpu_rl_program
import ...`` (the branch a program takes when run as ``python3 /tpu-rl/<file>``, no package around it; as
``stage_dataset.py`` imports ``base_snapshot.py``). A name that is no file of the folder (``from google.cloud import
storage`` in a function, ``from core import hf_model`` in the package's branch) is the image's or the repository's."""


def program_imports(file_name: str) -> tuple[str, ...]:
    """The files of ``workloads/container`` (and ``CORE_FILES``, ``core``'s) the program ``file_name`` imports from its
    folder (``_BESIDE``), read from its source: each goes into every ConfigMap that holds the importer
    (``program_files``). ``shown.py``, what a step prints of a text from elsewhere, is one, for every program that
    prints such text; ``tpu_rl_program.py``, how a run ends, another; ``tpu_rl_watch.py``, training's watchers' helpers,
    only training's programs import; a snippet imports none."""
    if file_name in SNIPPETS:
        return ()
    source = _core_source(file_name) if file_name in CORE_FILES else _container_source(file_name)
    found = (f"{name}.py" for name in _BESIDE.findall(source))
    return tuple(name for name in found if (CONTAINER / name).is_file() or name in CORE_FILES)


def program_files(*file_names: str) -> dict[str, str]:
    """The programs ``file_names`` and every program they import (``program_imports``, and what those import), each's
    text as the image runs it (``program_file``): the files a folder needs to run them, by file name."""
    needed, pending = set(), list(file_names)
    while pending:
        name = pending.pop()
        if name not in needed:
            needed.add(name)
            pending.extend(program_imports(name))
    return {name: program_file(name) for name in sorted(needed)}


def step_files(script: str, data: dict[str, str] | None = None) -> dict[str, str]:
    """The files of a step's ConfigMap: its bash script (``RUN_SCRIPT``), the programs it names (``run_program``) and
    those they import (``program_files``), only those, so a change to one program changes only the steps that run
    it, and its ``data`` files (training's ``train_config``)."""
    return {RUN_SCRIPT: script, **program_files(*_PROGRAM_FILE.findall(script)), **(data or {})}
