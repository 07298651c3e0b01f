"""What each step does beyond the generic path of ``workloads.workflow`` (register, wait, check the output):
one ``StepWiring`` per step of the catalogue that needs one (``WIRING``), found by the step's name; any other
step gets the generic ``StepWiring``.

A wiring says what a step waits for besides the step it reads (``gates``, ``after``), which earlier steps'
results its verification uses (``uses``), how its output is verified once it succeeded (``verify``: the generic
check of its kind of output, ``workloads.observe.artifacts.CHECKS``, and whatever the step adds), what it hands on
when nothing is read (``offline``: the offline plan, a preview), what it adds to the ``steps`` output
(``outputs``) and a check of its output beyond GCS for a completed step (``output_check``).

A step's result is a plain dict (an Output of one): ``{"uri": ...}`` and what the step adds (the conversion's
``baseCommit``, training's ``step``, ``summary`` and ``rewardCurve``, the publication's ``url``, ``branch`` and
``commit``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn

import pulumi
import pulumi_kubernetes as k8s

from core.hf_model import ModelLayout
from core.names import HUB_URL
from core.printed_commands import make_target
from core.settings import Settings
from infra.k8s.object import KubernetesObject
from infra.stop import StopError, log_info, log_warn
from workloads.reader import Hub, HubUnknownError, LiveReader, OpenBucket, gcs_read, read_export
from workloads.specs.card_config import CARD_FILES, card_config_map
from workloads.specs.step_inputs import ExportInputs, PublishInputs, StepInputs
from workloads.specs.step_specs import Step, Workflow

Result = dict[str, Any]


@dataclass(frozen=True)
class Context:
    """What a step's wiring may use: each step's inputs, the plan, the live reader, the platform's pieces."""

    inputs: StepInputs
    plan: Workflow
    parent: pulumi.Resource
    """The workflow component: the parent of what a wiring registers, the resource its logs name."""
    reader: LiveReader | None
    """The live reader (None for the offline plan)."""
    verify: bool
    """Whether outputs are read and checked (`pulumi up`; not the offline plan, not a preview)."""
    provider: k8s.Provider
    cluster: pulumi.Resource | None
    ready: Sequence[pulumi.Resource]
    tpu_pools: Sequence[pulumi.Resource]
    base_commit: str | None = None
    """The commit the preflight resolved the model's revision to (None: not checked)."""


def retried(step: Step, problem: str) -> NoReturn:
    """Stop `up`: a completed step's output is unusable, so the next `up` runs the step again."""
    raise StopError(
        f"{problem}; the next `{make_target('up', pulumi.get_stack())}` runs {step.name} again (a completed step "
        "whose output is incomplete is retried)"
    )


def live(context: Context) -> LiveReader:
    """The live reader: every check of a step's output has it (outputs are checked only where it reads,
    ``Context.verify``)."""
    assert context.reader is not None, "a step's output is checked only with the live reader"
    return context.reader


def verified(context: Context, step: Step) -> None:
    """Fail `up` when a completed step's output is unusable by the check of its kind (the next `up` runs it
    again)."""
    from workloads.observe.artifacts import step_problem

    problem = gcs_read(
        live(context).bucket,
        f"checking {step.artifact_uri}",
        lambda client, call: step_problem(client, step.output, step.artifact_uri, **call),
    )
    if problem:
        retried(step, problem)


class StepWiring:
    """The generic step: it reads the step before it, and its output is checked by its kind."""

    uses: ClassVar[tuple[str, ...]] = ()
    """The earlier steps whose results ``verify`` receives (by name, in this order)."""

    def gates(self, context: Context, step: Step) -> list[pulumi.Output[Any]]:
        """What must resolve before the step is registered, besides the verified output it reads."""
        return []

    def after(self, context: Context, step: Step, results: Mapping[str, pulumi.Output[Result]]) -> list[Any]:
        """Resources the step is registered after, besides the step it reads (it may register them)."""
        return []

    def verify(self, context: Context, step: Step, used: Sequence[Result]) -> Result:
        """After the step succeeded in `up`: fail when its output is unusable, else what it hands on."""
        verified(context, step)
        return {"uri": step.artifact_uri}

    def offline(self, context: Context, step: Step) -> Result:
        """What it hands on when nothing is read (the offline plan, a preview)."""
        return {"uri": step.artifact_uri}

    def outputs(self, result: pulumi.Output[Result]) -> dict[str, pulumi.Output[Any]]:
        """What it adds to its entry of the ``steps`` output."""
        return {}

    def output_check(self, context: Context, step: Step) -> str | None:
        """Why a completed step's output is unusable beyond its files in GCS (None: it is not, or the step has
        no such check); ``HubUnknownError`` when that cannot be known."""
        return None


class ConvertWiring(StepWiring):
    """The conversion hands on the commit of the base model it converted (``source.json``)."""

    def verify(self, context: Context, step: Step, used: Sequence[Result]) -> Result:
        from workloads.observe.artifacts import source_record

        verified(context, step)
        output = step.output_uri
        record = gcs_read(
            live(context).bucket,
            f"reading the conversion's record under {output}",
            lambda client, call: source_record(client, output, **call),
        )
        if record is None:  # verified read it a moment ago
            retried(step, f"conversion finished but its record {output}source.json is missing")
        return {"uri": step.artifact_uri, "baseCommit": record.commit}

    def offline(self, context: Context, step: Step) -> Result:
        return {"uri": step.artifact_uri, "baseCommit": context.base_commit}

    def outputs(self, result: pulumi.Output[Result]) -> dict[str, pulumi.Output[Any]]:
        return {"baseCommit": result.apply(lambda found: found["baseCommit"])}


class TrainWiring(StepWiring):
    """Training waits for the slice's pools and (without Kueue) for no other training to hold the slice; it
    hands on the newest complete checkpoint found in GCS, with the run's summary."""

    def gates(self, context: Context, step: Step) -> list[pulumi.Output[Any]]:
        """Without Kueue, no other training on the slice; and (`up` only) no host maintenance of the slice scheduled
        inside the expected training, which starts after the steps before it in the plan."""
        if context.reader is None:
            return []
        steps = list(context.plan.steps)
        gates = [context.reader.check_maintenance(step, steps[: steps.index(step)])]
        if not context.inputs.train.queued:
            gates.insert(0, context.reader.check_slice_free(step))
        return gates

    def after(self, context: Context, step: Step, results: Mapping[str, pulumi.Output[Result]]) -> list[Any]:
        return list(context.tpu_pools)

    def offline(self, context: Context, step: Step) -> Result:
        expected = context.inputs.train.final_step
        return {
            "step": expected,
            "uri": f"{step.artifact_uri}{expected}/model_params/",
            "summary": None,
            "datasetCommit": None,
        }

    def verify(self, context: Context, step: Step, used: Sequence[Result]) -> Result:
        from workloads.observe.artifacts import final_checkpoint, short_run_warning

        inputs = context.inputs.train
        found = gcs_read(
            live(context).bucket,
            f"listing the checkpoints under {step.artifact_uri}",
            lambda client, call: final_checkpoint(client, step.artifact_uri, **call),
        )
        if found is None:
            verified(context, step)  # raises: no complete checkpoint
            # It lists again and did not raise: a complete checkpoint appeared between the two listings.
            raise StopError(
                f"the checkpoints under {step.artifact_uri} changed while they were checked (none was "
                f"complete, then one was); run `{make_target('up', pulumi.get_stack())}` again"
            )
        warning = short_run_warning(found, inputs.final_step, inputs.prefill)
        if warning:
            log_warn(warning, resource=context.parent)
        summary, curve = self._summary(context, step)
        return {
            "step": found.step,
            "uri": found.uri,
            "summary": summary,
            "rewardCurve": curve,
            "datasetCommit": self._dataset_commit(context, step),
        }

    def outputs(self, result: pulumi.Output[Result]) -> dict[str, pulumi.Output[Any]]:
        return {
            "finalStep": result.apply(lambda found: found["step"]),
            "checkpointUri": result.apply(lambda found: found["uri"]),
            "summary": result.apply(lambda found: found["summary"]),
            "datasetCommit": result.apply(lambda found: found.get("datasetCommit")),
        }

    @staticmethod
    def _dataset_commit(context: Context, train: Step) -> str | None:
        """The commit of the dataset the run trained on (its record, ``<output>dataset/dataset.json``), None where it
        cannot be read: a convenience for the stack's outputs and the model card, which never fails `up`."""
        from workloads.observe.artifacts import bounded, dataset_record

        output = train.output_uri
        try:
            client = live(context).bucket()
            record = bounded(client, f"reading {output}", lambda call: dataset_record(client, output, **call))
        except Exception as err:  # noqa: BLE001 (bounded: StorageError; no credentials: google-auth's error)
            log_warn(
                f"the dataset record of {train.name} was not read ({type(err).__name__}); the model card says "
                "its commit was not recorded",
                resource=context.parent,
            )
            return None
        return record.commit if record is not None else None

    @staticmethod
    def _summary(context: Context, train: Step) -> tuple[dict[str, Any] | None, bytes | None]:
        """Before/after accuracy, final reward and chip-hours of a finished run, and (for a publication's card)
        its reward curve; None where they cannot be read."""
        from workloads.observe.run_data import gather

        try:
            data = gather(live(context).bucket(), train.output_uri)
        except Exception as err:  # noqa: BLE001 (the summary is a convenience: it never fails `up`)
            log_warn(
                f"no run summary for {train.name} ({type(err).__name__}); `make report` reads it later",
                resource=context.parent,
            )
            return None, None
        curve = None
        if context.plan.publish is not None:
            from workloads.observe.plots import reward_curve_png

            try:
                curve = reward_curve_png(data)
            except Exception as err:  # noqa: BLE001 (the card says the curve was not recorded)
                log_warn(f"no reward curve for the model card ({type(err).__name__})", resource=context.parent)
        return data.summary(context.inputs.train.chips), curve


def base_differences(
    base: ExportInputs,
    layout: ModelLayout | None,
    token: str,
    endpoint: str | None = None,
    revision: str | None = None,
) -> list[str]:
    """How an exported layout differs from the base model ``base.base_repo`` on the Hub at ``revision`` (default
    ``base.base_revision``, ``tpu-rl:model.revision``; the commit that was converted, once it is recorded): its
    config, every tensor's name, shape and dtype (``core.hf_model.compare``); empty: it is the whole base model."""
    from core.hf_model import compare
    from workloads.preflight import HubError, base_model_layout

    if layout is None:  # never with an export free of problems (read_exported)
        raise StopError("export check: the exported folder holds no model")
    try:
        found = base_model_layout(base.base_repo, revision or base.base_revision, token, endpoint)
    except HubError as err:
        raise StopError(
            f"export check: {err} (tpu-rl:workflow.verifyExport: false skips the comparison)", err.exit_code
        ) from None
    return compare(layout, found)


def export_differences(
    settings: Settings, hf_uri: str, bucket: OpenBucket, hub: Hub, revision: str | None = None
) -> list[str]:
    """The export's own problems (files that are not a model's, missing files, shards cut short, an index that
    disagrees with the headers), or else how it differs from the base model at ``revision`` (empty: it is whole
    and is the whole base model)."""
    exported = read_export(bucket, hf_uri)
    if exported.problems:  # a folder without a layout always has its problems
        return list(exported.problems)
    model = settings.model
    base = ExportInputs(settings.workflow.verify_export, model.spec.hf_repo, model.revision)
    return base_differences(base, exported.layout, hub.read_token, hub.endpoint, revision)


class ExportWiring(StepWiring):
    """The export is checked to be the whole base model at the commit the conversion converted."""

    uses = ("convert",)

    def verify(self, context: Context, step: Step, used: Sequence[Result]) -> Result:
        if context.inputs.export.verify:
            (converted,) = used
            self._matches_base(context, step, converted["baseCommit"])  # one read: its own check, the comparison
        else:
            verified(context, step)
        return {"uri": step.artifact_uri}

    @staticmethod
    def _matches_base(context: Context, step: Step, commit: str | None) -> None:
        """Fail `up` when the export is incomplete (retried, as ``verified`` says) or is not the whole base model
        at the converted ``commit`` (another config, a missing, extra or reshaped tensor, a dtype slip), with the
        first differences and the logs."""
        from workloads.observe.artifacts import first_of, incomplete_export

        reader = live(context)
        exported = read_export(reader.bucket, step.artifact_uri)
        problem = incomplete_export(step.artifact_uri, exported.problems)
        if problem:
            retried(step, problem)
        inputs = context.inputs.export
        hub = reader.hub
        found = base_differences(inputs, exported.layout, hub.read_token, hub.endpoint, commit)
        base = f"{inputs.base_repo}@{commit or inputs.base_revision}"
        if found:
            raise StopError(
                f"the exported model {step.artifact_uri} does not match {base} (the commit converted): "
                f"{first_of(found)}; export logs: {step.logs_command}. Exporting the same checkpoint again gives "
                "the same model, so the next `up` does not retry it: change what the export runs "
                "(tpu-rl:images.maxtext, tpu-rl:model) or set tpu-rl:workflow.verifyExport: false"
            )
        log_info(f"export check: {step.artifact_uri} matches {base}", context.parent)


class PublishWiring(StepWiring):
    """The publication: its model card (a ConfigMap, written once, registered before it), then the upload; it
    hands on the branch's commit, read back from the Hub and checked to hold every exported file."""

    def after(self, context: Context, step: Step, results: Mapping[str, pulumi.Output[Result]]) -> list[Any]:
        from workloads.specs.step_specs import card_name

        plan, inputs = context.plan, self._inputs(context)
        digests: pulumi.Input[dict[str, str]] = {}
        if context.reader is not None:
            digests = context.reader.image_digests([plan.train, plan.export], after=results["export"])

        # The records of the steps before it (an evaluation's answers) are in the card: it waits for them.
        recorded = [results[s.step] for s in plan.steps if s.output == "record" and s.step in results]

        def card(args: list[Any]) -> dict[str, Any]:
            trained, images, converted, *records = args
            found = tuple(r["record"] for r in records if r.get("record"))
            readme, image = self._card(context, step, trained, images, converted["baseCommit"], found)
            return card_config_map(inputs.card_metadata, readme, image)

        manifest = pulumi.Output.all(results["train"], digests, results["convert"], *recorded).apply(card)
        card_map = KubernetesObject(
            card_name(step.name),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": inputs.card_metadata,
                "data": manifest.apply(lambda m: m["data"]),
                "binaryData": manifest.apply(lambda m: m.get("binaryData", {})),
            },
            opts=pulumi.ResourceOptions(
                parent=context.parent,
                provider=context.provider,
                deleted_with=context.cluster,
                depends_on=list(context.ready),
                # The card of a run is written once: a later `up` (its numbers read again) never rewrites it.
                ignore_changes=["data", "binaryData"],
            ),
        )
        return [card_map]

    def offline(self, context: Context, step: Step) -> Result:
        return {**self._where(context, step), "commit": None}

    def verify(self, context: Context, step: Step, used: Sequence[Result]) -> Result:
        from workloads.observe.artifacts import no_record

        where = self._where(context, step)
        try:
            problem, commit = self.on_hub(context, step)
        except HubUnknownError as err:
            log_warn(f"{err}; hubCommit is the commit the step recorded", resource=context.parent)
            commit = self._recorded_commit(context, step)
            if commit is None:
                retried(step, no_record(step.artifact_uri))
            return {**where, "commit": commit}
        if problem:
            retried(step, f"{problem}; publish logs: {step.logs_command}")
        log_info(f"published: {where['url']}/tree/{where['branch']} is commit {commit}", context.parent)
        return {**where, "commit": commit}

    def output_check(self, context: Context, step: Step) -> str | None:
        return self.on_hub(context, step)[0]

    @staticmethod
    def _inputs(context: Context) -> PublishInputs:
        assert context.inputs.publish is not None  # a plan with the publish step has them
        return context.inputs.publish

    def _where(self, context: Context, step: Step) -> Result:
        from workloads.specs.step_specs import branch_of

        return {"url": f"{HUB_URL}/{self._inputs(context).repo}", "branch": branch_of(step.step_id)}

    @staticmethod
    def _card(
        context: Context,
        step: Step,
        found: dict[str, Any],
        digests: dict[str, str],
        commit: str | None,
        records: tuple[dict[str, Any], ...] = (),
    ) -> tuple[str, bytes | None]:
        """The model card's text and the reward curve (``workloads.specs.model_card``), from plain values; the
        base is the ``commit`` converted."""
        from workloads.specs.card_config import REWARD_IMAGE, REWARD_IMAGE_MAX_BYTES
        from workloads.specs.model_card import model_card

        inputs = PublishWiring._inputs(context)
        image = found.get("rewardCurve")
        if image is not None and len(image) > REWARD_IMAGE_MAX_BYTES:
            log_warn(f"the reward curve ({len(image)} bytes) is too large for the model card; left out", context.parent)
            image = None
        staged, dataset_commit = inputs.staged_repo, found.get("datasetCommit")
        facts = dataclasses.replace(
            inputs.card,
            base_commit=commit,
            dataset_commit=(staged, dataset_commit) if staged and dataset_commit else None,
            image_digests=digests,
            summary=found.get("summary"),
            reward_image=REWARD_IMAGE if image else None,
            records=records,
        )
        return model_card(facts), image

    @staticmethod
    def on_hub(context: Context, step: Step) -> tuple[str | None, str | None]:
        """(why the publish step's branch does not hold the export, None when it does; the branch's commit): the
        branch must exist and hold exactly the exported files, each with its size, and the card.
        ``HubUnknownError`` when the Hub cannot say (unreachable, a revoked token)."""
        from core.hf_model import name_problem
        from workloads.observe.artifacts import first_of, incomplete_export
        from workloads.preflight import HubError, published_revision
        from workloads.specs.step_specs import branch_of

        repo, branch = PublishWiring._inputs(context).repo, branch_of(step.step_id)
        export_uri = context.plan.export.artifact_uri
        reader = live(context)
        exported = read_export(reader.bucket, export_uri)
        if exported.problems:  # the export is run again first (its own check); then this publication
            return incomplete_export(export_uri, exported.problems), None
        try:
            found = published_revision(repo, branch, reader.hub.write_token, reader.hub.endpoint)
        except HubError as err:
            raise HubUnknownError(f"cannot check the publication of {step.name} on the Hub: {err}") from None
        if found is None:
            return (
                f"publish finished but {repo} has no branch {branch} (deleted since, or the write token cannot see it)",
                None,
            )
        commit, files = found
        wanted = {name: size for name, size in exported.files.items() if name not in CARD_FILES}
        differences = [
            f"{name} ({'missing' if name not in files else f'{files[name]} bytes, not {size}'})"
            for name, size in sorted(wanted.items())
            if files.get(name, -1) not in (size, None)
        ]
        if "README.md" not in files:
            differences.append("README.md (the model card) missing")
        extra = sorted(set(files) - set(wanted) - set(CARD_FILES) - {".gitattributes"})
        # Names from the Hub are shown, never used as paths: one that is no plain file name is said to be one.
        differences += [
            f"{name} (not in the export)"
            if name_problem(name) is None
            else f"a file on the branch: {name_problem(name)}"
            for name in extra
        ]
        if differences:
            return (
                f"publish finished but {repo}@{branch} does not hold the export {export_uri}: {first_of(differences)}",
                commit,
            )
        return None, commit

    @staticmethod
    def _recorded_commit(context: Context, step: Step) -> str | None:
        """The commit the publish step recorded (``published.json``), None without a record."""
        from workloads.observe.artifacts import published_record

        record = gcs_read(
            live(context).bucket,
            f"reading {step.artifact_uri}",
            lambda client, call: published_record(client, step.artifact_uri, **call),
        )
        return str(record["commit"]) if record else None


class RecordWiring(StepWiring):
    """A step whose output is a step record (``core.records``): it hands on the record, checked and parsed, which
    the ``steps`` output summarises and the model card shows."""

    def verify(self, context: Context, step: Step, used: Sequence[Result]) -> Result:
        from workloads.observe.artifacts import no_step_record, step_record

        record = gcs_read(
            live(context).bucket,
            f"reading {step.artifact_uri}",
            lambda client, call: step_record(client, step.artifact_uri, **call),
        )
        if record is None:
            retried(step, no_step_record(step.artifact_uri))
        log_info(f"{step.step}: {record.title}: {record.summary}", context.parent)
        return {"uri": step.artifact_uri, "record": record.to_json()}

    def offline(self, context: Context, step: Step) -> Result:
        return {"uri": step.artifact_uri, "record": None}

    def outputs(self, result: pulumi.Output[Result]) -> dict[str, pulumi.Output[Any]]:
        return {"summary": result.apply(lambda found: (found["record"] or {}).get("summary"))}


WIRING: dict[str, StepWiring] = {
    "convert": ConvertWiring(),
    "train": TrainWiring(),
    "export": ExportWiring(),
    "publish": PublishWiring(),
}
"""The steps that do more than the generic path, by name."""
BY_OUTPUT: dict[str, StepWiring] = {"record": RecordWiring()}
"""What any other step does, by the kind of output it leaves (``Step.output``); else the generic ``StepWiring``."""


def wiring_of(step: Step) -> StepWiring:
    return WIRING.get(step.step) or BY_OUTPUT.get(step.output) or StepWiring()
