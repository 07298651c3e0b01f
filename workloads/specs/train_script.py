"""The training container's script: the bash that runs train_rl on the Pathways head, waits for its slice, watches it
and judges how it ended (plain functions, no Pulumi). The argv and the lines every step's script shares are
``workloads.specs.commands``'; the programs it runs are files of its ConfigMap (``workloads/container``)."""

from __future__ import annotations

import json
import shlex

from core.knobs import DATASETS
from core.layout import STAGED_DATASET, actor_checkpoints, dataset_cache
from core.names import DRILL_EXIT, SLICE_DOWN_EXIT, SLICE_WAIT_EXIT, STALLED_EXIT
from core.settings import Settings
from core.step_config import LAUNCHER
from workloads.container.launch import RESUMED_ENV
from workloads.container.launch import SKIPPED as PRE_RL_SKIPPED
from workloads.container.restart_drill import SAYS as DRILL_SAYS
from workloads.specs.commands import (
    SCRIPTS_DIR,
    TRAIN_BASE_DIR,
    UTILS_RL,
    base_line,
    mark_folder,
    maxtext_check,
    quote,
    run_program,
    staged_dataset,
)

SCAN_ERRORS = "/tmp/tpu-rl-checkpoint-scan.err"
"""Where the training script keeps what ``checkpoint_scan.py`` said on stderr (its last line is shown)."""
SIDE_PATTERN = (
    r"Pre RL Training:|Post RL Training:|Intermediate Eval \(step=|Restored params from step:|Fast forwarded"
    r"|Setting up RL trainer\.\.\.|tpu-rl: the slice |tpu-rl: waiting for the slice |tpu-rl: cannot read the slice"
    r"|tpu-rl: stalled: |"
    + DRILL_SAYS
    + "|"
    + PRE_RL_SKIPPED  # plain text: no character of either is special to grep -E
)
"""The lines the training script copies to the side file as they appear (``grep -E``), from the wait for the slice
(``slice_state.py``'s lines: waiting, up, not back, unread) to train_rl's end."""
RUN_LINE = "tpu-rl run: "
"""The first line of each training log and side file: what the run is (written by the training script)."""
STALL_ENV = "TPU_RL_STALL_SECONDS"
"""The workload container's stall bound (an operational field: ``workloads.specs.step_specs``)."""
DRILL_ENV = "TPU_RL_RESTART_DRILL"
"""``true`` when the training run does the restart drill (``tpu-rl:workflow.restartDrill``, an operational field)."""
SLICE_WAIT_ENV = "TPU_RL_SLICE_WAIT_SECONDS"
"""How long an attempt waits for its slice's workers before train_rl starts, and, when the wait could not read them,
for its devices once it has: the attempt's recovery budget (``tpu-rl:kueue.recoveryTimeout``, an operational field
like ``STALL_ENV``)."""
ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet mounts the head's service account token, CA and namespace (Kubernetes "Service account token
volume projection": ``kube-api-access-*`` at this path)."""
SLICE_BASELINE = "/tmp/tpu-rl-slice.json"
"""The workers the attempt's wait found Ready (``slice_state.py``): what the judge's check compares them with."""
DRILL_MARKER = "/tmp/tpu-rl-drilled"
TRAIN_LOG = "/tmp/tpu-rl-train.log"
EVALS_LOG = "/tmp/tpu-rl-evals.txt"
STALL_MARKER = "/tmp/tpu-rl-stalled"
LAUNCH_ENV = (("HF_HUB_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "0"))
"""The environment train_rl starts in (the launcher line's prefix), for two libraries that read it:

- ``HF_HUB_OFFLINE=1``: huggingface_hub makes no request (``constants.HF_HUB_OFFLINE``, checked on every request), so
  the tokenizer and vLLM's model config come from ``TRAIN_BASE_DIR``'s files alone, and a call that would reach the Hub
  fails at once instead of fetching another revision;
- ``HF_DATASETS_OFFLINE=0``: ``datasets`` reads its own variable first and falls back to huggingface_hub's only when
  it is unset (``datasets/config.py``, 4.8.5 to 5.2.0: ``HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE if _offline is None
  else ...``); offline, it refuses every remote file (``utils/file_utils.py`` ``fsspec_head``, ``fsspec_get``: "Offline
  mode is enabled. Tried to reach gs://..."), the staged ``gs://`` parquet files of ``hf_train_files`` among them. Set
  to ``0``, it reads them through fsspec (gcsfs); a request of its own to the Hub still goes through huggingface_hub,
  which refuses it.
"""


def run_record(settings: Settings, argv: list[str]) -> dict[str, object]:
    """What a training run is, written as the first line of its log (``RUN_LINE``, read back by
    ``workloads.observe.evaluations``); only what the step's identity covers, so it never changes a step's hash on its
    own."""
    shape = settings.slice
    return {
        "model": settings.model.spec.name,
        "hfRepo": settings.model.spec.hf_repo,
        "slice": {
            "version": shape.version,
            "machineType": shape.machine_type,
            "topology": shape.topology,
            "slices": settings.tpu.slices,
            "chips": shape.chips * settings.tpu.slices,
        },
        "optimizer": settings.training.optimizer,
        "dataset": settings.training.dataset,
        "argv": argv[2:],
    }


def dataset_lines(settings: Settings, output_uri: str) -> list[str]:
    """The training script's lines that stage its dataset's files (``staged_dataset``, ``workloads/container/
    stage_dataset.py``) at ``tpu-rl:training.datasetRevision``, from the stack's dataset cache
    (``core.layout.dataset_cache``: the Hub sends each file once per dataset and commit, each hashed against the Hub's
    value before use); none when the dataset names no files."""
    staged = staged_dataset(DATASETS[settings.training.dataset], output_uri)[1]
    if staged is None:
        return []
    repo, patterns = staged
    cache = dataset_cache(settings.bucket_name, settings.model.spec.name)
    revision = settings.training.dataset_revision
    words = " ".join(shlex.quote(w) for w in (repo, revision, output_uri + STAGED_DATASET, cache, *patterns))
    return [
        f"dataset_commit=$({run_program('stage_dataset.py')} {words})",
        f'echo "tpu-rl: the dataset {repo} at commit ${{dataset_commit}}, staged in {output_uri}{STAGED_DATASET}"',
    ]


def resume_lines(actor_uri: str) -> list[str]:
    """The training script's lines that tell the launcher whether this attempt resumes (``RESUMED_ENV``: it then skips
    train_rl's pre-RL evaluation, ``workloads/container/launch.py``): the newest complete checkpoint under
    ``actor_uri``, the one tunix restores, found by the export's own ``checkpoint_scan.py`` (exit 3: none). A scan
    that fails for any other reason resumes nothing: the evaluation runs, as it always did."""
    root = shlex.quote(actor_uri)
    return [
        f'scan=0; resumed="$({run_program("checkpoint_scan.py")} {root} 2>{SCAN_ERRORS})" || scan=$?',
        'case "$scan:$resumed" in',
        f'  0:gs://*) export {RESUMED_ENV}="$resumed"',
        '     resume_note="tpu-rl: resuming from ${resumed}: train_rl skips the pre-RL evaluation" ;;',
        '  3:*) resume_note="tpu-rl: a fresh attempt (no complete checkpoint): train_rl runs the pre-RL evaluation" ;;',
        f'  *) resume_note="tpu-rl: no checkpoint read (exit $scan: $(tail -n 1 {SCAN_ERRORS})):'
        ' train_rl runs the pre-RL evaluation" ;;',
        "esac",
        'echo "$resume_note"',
    ]


def drill_lines(settings: Settings, output_uri: str) -> list[str]:
    """The training script's lines that start the restart drill (``workloads/container/restart_drill.py``) beside
    train_rl when ``DRILL_ENV`` is ``true`` (``tpu-rl:workflow.restartDrill``, read at run time: an operational
    field) and the attempt starts fresh (``resume_lines``' scan found no complete checkpoint, exit 3): the drill then
    ends it once after the run's first committed checkpoint. An attempt that resumes, or whose scan could not say,
    never runs it."""
    actor = actor_checkpoints(output_uri)
    final = settings.training.final_step
    return [
        'drill=""',
        f'if [ "${{{DRILL_ENV}:-false}}" = true ] && [ "$scan" = 3 ]; then',
        "  echo \"tpu-rl: the restart drill is on: this fresh attempt ends once after the run's first committed "
        f'checkpoint (tpu-rl:workflow.restartDrill)" >> {TRAIN_LOG}',
        f'  {run_program("restart_drill.py")} "$child" {TRAIN_LOG} {final} {DRILL_MARKER} {shlex.quote(actor)} &',
        "  drill=$!",
        "fi",
    ]


def slice_lines(settings: Settings) -> list[str]:
    """The training script's lines that wait for the attempt's slice before train_rl starts
    (``workloads/container/slice_state.py wait``): every worker of the slice Ready, at most ``SLICE_WAIT_ENV``
    seconds. SIGTERM ends the wait as it ends train_rl (the trap names ``$child``). A slice that does not come back
    within the budget ends the attempt with ``SLICE_WAIT_EXIT``, its line in the side file, both files copied. The
    side file's follower (``side_lines``) runs from before the wait, so each of its lines reaches the side file, and
    `make status`, as it is said."""
    workers = settings.slice.hosts * settings.tpu.slices
    upload = run_program("upload.py")
    return [
        *side_lines(),
        f': "${{{SLICE_WAIT_ENV}:?is set by the manifest (tpu-rl:kueue.recoveryTimeout)}}"',
        f'{run_program("slice_state.py")} wait {ACCOUNT_DIR} {workers} "${{{SLICE_WAIT_ENV}}}" {SLICE_BASELINE} '
        f"{TRAIN_LOG} {SLICE_WAIT_EXIT} &",
        'child=$!; what="the wait for the slice"',
        """trap 'echo "tpu-rl: forwarding SIGTERM to $what"; kill -TERM "$child" 2>/dev/null' TERM INT""",
        'wait "$child"; waited=$?',
        'while kill -0 "$child" 2>/dev/null; do wait "$child"; waited=$?; done  # a trapped signal ends wait early',
        'if [ "$waited" != 0 ]; then',
        '  kill "$keeper" 2>/dev/null; wait "$side"',
        f'  {upload} {TRAIN_LOG} "$log_uri"; {upload} {EVALS_LOG} "$evals_uri"',
        '  exit "$waited"',
        "fi",
    ]


def side_lines() -> list[str]:
    """The follower that copies the log's ``SIDE_PATTERN`` lines to the side file as they appear, and the side file to
    GCS after each: from the slice's wait to train_rl's end. ``tail --pid`` follows the log for as long as a keeper
    runs (a ``sleep`` the script kills once the log is complete; tail then reads what is left and ends), since neither
    the wait nor train_rl lives the whole span; the EXIT trap kills the keeper on any other way out."""
    upload = run_program("upload.py")
    return [
        "sleep 2147483647 & keeper=$!",
        """trap 'kill "$keeper" 2>/dev/null' EXIT""",
        f'tail -n +1 --pid="$keeper" -f {TRAIN_LOG} | grep --line-buffered -E {shlex.quote(SIDE_PATTERN)} |',
        f'  while IFS= read -r line; do printf "%s\\n" "$line" >> {EVALS_LOG}; {upload} {EVALS_LOG} "$evals_uri";',
        "  done &",
        "side=$!",
    ]


KEPT = "|".join(str(code) for code in (SLICE_DOWN_EXIT, STALLED_EXIT, DRILL_EXIT, SLICE_WAIT_EXIT))
"""The exit codes the training script keeps for its own verdicts (a ``case`` pattern): a judge that printed nothing
leaves train_rl's status, unless it is one of these, which only evidence may give (1 instead)."""


def judge_line(settings: Settings) -> str:
    """The line that judges how train_rl ended (``workloads/container/train_exit.py``), with the slice's evidence for
    any error it died of (``slice_state.py check``)."""
    workers = settings.slice.hosts * settings.tpu.slices
    return (
        f'judged="$({run_program("train_exit.py")} {TRAIN_LOG} "$status" {STALL_MARKER} '
        f"{SLICE_DOWN_EXIT} {STALLED_EXIT} {DRILL_MARKER} {DRILL_EXIT} "
        f'{SCRIPTS_DIR}/slice_state.py {ACCOUNT_DIR} {workers} {SLICE_BASELINE})"'
    )


def train_script(settings: Settings, argv: list[str], output_uri: str, convert_uri: str) -> str:
    """The training container's script (bash is the container's PID 1):

    - the image's MaxText checked against the adopted wheel's RECORD (``maxtext_check``), before the patch rewrites
      ``utils_rl.py`` and before anything reads a weight;
    - the optimizer patch (Adafactor), in strict mode: a changed image stops it;
    - the output folder created (``mark_folder``);
    - the base's files at the converted commit fetched into ``TRAIN_BASE_DIR`` (its ``tokenizer_path``);
    - the run record, first line of the attempt's log and of its side file, and the side file copied at
      once, so `make status` sees a new attempt as it starts;
    - the wait for the slice (``slice_lines``): every worker Ready, at most the recovery budget;
    - ``train_rl`` in the background, started by the launcher (``workloads/container/launch.py``) from its
      overrides, the ConfigMap's ``train.json`` (``train_config``), in ``LAUNCH_ENV`` (the Hub off for
      huggingface_hub, ``datasets`` able to read the staged copy in GCS; the script's own fetches before it, the
      dataset's first staging among them, keep the Hub), its output appended to the log, which ``tail --pid``
      shows on the container's stdout (``kubectl logs``); SIGTERM (a JobSet restart, a deadline, a deleted pod) is
      forwarded to it (PID 1 ignores a signal it has no handler for, so without the trap nothing would stop train_rl
      until the grace period's SIGKILL);
    - each evaluation and restore line, as it appears, appended to the side file and the side file
      copied (a killed attempt keeps its evaluations);
    - a stall watchdog (``workloads/container/stall_watchdog.py``) beside it: a log without training progress (a new
      step, a stage of start-up or evaluation) for ``$TPU_RL_STALL_SECONDS`` (``tpu-rl:workflow.stallTimeout``),
      counted from the first sign of devices up (until then the same bound once the wait saw every worker Ready, its
      ``SLICE_BASELINE``, else ``$TPU_RL_SLICE_WAIT_SECONDS``), ends train_rl;
    - the restart drill (``drill_lines``), when ``$TPU_RL_RESTART_DRILL`` is ``true`` and the attempt starts fresh;
    - when train_rl exits, for any reason, the log and the side file copied to ``<output>logs/``, and the
      container exits as ``workloads/container/train_exit.py`` judges by the evidence in the log and, for an error,
      in the slice's pods (``judge_line``): 0 once training completed, the
      error it died of (``SLICE_DOWN_EXIT`` for a lost TPU slice), ``STALLED_EXIT`` after a stall with no other
      evidence (both counted as disruptions, which the JobSet restarts), ``DRILL_EXIT`` after the drill (restarted
      once, not counted), else train_rl's status.
      No pipeline judges the log: with ``pipefail`` a ``tail | grep -q`` that stops reading
      early kills ``tail`` with SIGPIPE and turns a match into a failure.
    """
    lines = ["set -euo pipefail", maxtext_check(settings.images.maxtext, settings.images.maxtext_check)]
    if settings.training.optimizer == "adafactor":
        lines.append(f"{run_program('optimizer_patch.py')} {quote(UTILS_RL)}")
    record = json.dumps(run_record(settings, argv), separators=(",", ":"))
    upload = run_program("upload.py")
    lines += [
        mark_folder(output_uri),
        base_line("fetch", convert_uri, TRAIN_BASE_DIR),
        'echo "tpu-rl: the base model at commit ${commit} (tokenizer_path)"',
        *dataset_lines(settings, output_uri),
        *resume_lines(actor_checkpoints(output_uri)),
        'attempt="$(date -u +%Y%m%dT%H%M%SZ)"',
        f'log_uri="{output_uri}logs/train-${{attempt}}.log"',
        f'evals_uri="{output_uri}logs/evals-${{attempt}}.txt"',
        f"printf '%s\\n' {shlex.quote(RUN_LINE + record)} > {TRAIN_LOG}",
        f"cp {TRAIN_LOG} {EVALS_LOG}",
        f"printf '%s\\n' \"$resume_note\" >> {TRAIN_LOG}",  # in the log copied at the end, not the side file
        f'{upload} {EVALS_LOG} "$evals_uri"',
        f': "${{{STALL_ENV}:?is set by the manifest (tpu-rl:workflow.stallTimeout)}}"',
        "set +e",
        f"rm -f {STALL_MARKER} {DRILL_MARKER} {SLICE_BASELINE}",
        *slice_lines(settings),
        *run_lines(settings, output_uri),
    ]
    return "\n".join(lines) + "\n"


def launch_env() -> str:
    """``LAUNCH_ENV`` as the launcher line's prefix (``NAME=value ...``)."""
    return " ".join(f"{name}={value}" for name, value in LAUNCH_ENV)


def run_lines(settings: Settings, output_uri: str) -> list[str]:
    """The training script's lines from train_rl's start to the container's exit (``train_script``'s list, from the
    launcher on): train_rl, its watchers, its end, the copies and the judge."""
    upload = run_program("upload.py")
    return [
        'echo "tpu-rl: starting train_rl (VLLM_HOST_IP=${VLLM_HOST_IP:-unset})"',
        f"{launch_env()} {run_program(LAUNCHER)} >> {TRAIN_LOG} 2>&1 &",
        "child=$!; what=train_rl",
        f'{run_program("stall_watchdog.py")} "$child" {TRAIN_LOG} "${{{STALL_ENV}}}" {STALL_MARKER} '
        f'"${{{SLICE_WAIT_ENV}}}" {SLICE_BASELINE} &',
        "watchdog=$!",
        *drill_lines(settings, output_uri),
        f'tail -n +1 --pid="$child" -f {TRAIN_LOG} &',
        "shown=$!",
        'wait "$child"; status=$?',
        'while kill -0 "$child" 2>/dev/null; do wait "$child"; status=$?; done  # a trapped signal ends wait early',
        'kill "$watchdog" 2>/dev/null; wait "$watchdog"',
        'if [ -n "$drill" ]; then kill "$drill" 2>/dev/null; wait "$drill"; fi',
        'kill "$keeper" 2>/dev/null; wait "$shown" "$side"',
        f'{upload} {TRAIN_LOG} "$log_uri"',
        f'{upload} {EVALS_LOG} "$evals_uri"',
        judge_line(settings),
        # the judge could not run: train_rl's status, unless it is one of the script's own verdicts
        f'case "$judged" in ""|*[!0-9]*) case "$status" in {KEPT}) judged=1 ;; *) judged="$status" ;; esac ;; esac',
        'exit "$judged"',
    ]
