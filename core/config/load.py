"""Raw stack config -> validated ``core.settings.Settings``, before any resource is registered.

``load_settings`` takes the config as the Pulumi CLI hands it to the program (full key ->
string, objects as JSON; a stack file's YAML scalars work too), reads every field of
``core.config.schema`` with its strict reader, applies the cross-field rules of
``core.config.rules`` and returns frozen settings. Every problem of the config is reported at once, in
one ``ConfigError``: one line each, naming the full key, the value and what is allowed (a rule that needs
a value which is itself wrong is skipped, not reported twice). Secrets and token-shaped values are never
echoed.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from core.config import rules
from core.config.fields import DERIVED, REQUIRED, Field
from core.config.formats import IAM_MEMBERS, MAXTEXT_ARGS, NETWORKS, REGISTRIES
from core.config.lists import read_members, read_networks, read_registries
from core.config.schema import FIELDS, PROJECT_KEYS, SECRET_KEYS, declared_default, fields_of, is_object
from core.config.values import (
    OFFLINE_SECRETS,
    UNREADABLE,
    ConfigError,
    Hidden,
    Integer,
    Number,
    Problems,
    Values,
    error,
)
from core.inputs import InputError, parse_json
from core.maxtext_keys import closest_key, known_keys, refused_keys
from core.names import PROJECT
from core.printed_commands import ANY_STACK, pulumi_config_rm, pulumi_config_set
from core.redact import HF_TOKEN
from core.settings import AccessSettings, Settings

TOKEN_KEY = f"{PROJECT}:hfToken"
WRITE_TOKEN_KEY = f"{PROJECT}:hfWriteToken"
MAX_JSON_CHARS = 200_000


def load_settings(raw: Mapping[str, Any], stack: str, secret_keys: frozenset[str] = frozenset()) -> Settings:
    """Validate the raw stack config (full key -> value) and return typed Settings, or raise one
    ``ConfigError`` holding every problem (one line each)."""
    problems = Problems()
    values = _read_all(raw, secret_keys, problems, stack)
    settings = rules.build_settings(values, stack, problems)
    problems.check()
    return settings


def read_fields(
    raw: Mapping[str, Any], secret_keys: frozenset[str] = frozenset(), stack: str = ANY_STACK
) -> dict[str, Any]:
    """Every field's typed value (``None`` where unset and derived), or one ``ConfigError`` with every field's
    problem (the cross-field rules are ``load_settings``'s); ``stack`` is the one the fixes' commands name."""
    problems = Problems()
    values = _read_all(raw, secret_keys, problems, stack)
    problems.check()
    return dict(values)


def read_access(raw: Mapping[str, Any], stack: str) -> AccessSettings:
    """``tpu-rl:access`` alone, read as ``load_settings`` reads it, for a tool that reads no other key (`make
    state-bucket`: the state is made before the stack's settings are final); one ``ConfigError`` with each of its
    problems."""
    from core.config.storage_rules import access_settings

    problems = Problems()
    top = f"{PROJECT}:access"
    flat = problems.run(_flatten, top, raw.get(top), problems, stack)
    values = Values()
    for field in fields_of(top):
        value = UNREADABLE if flat is UNREADABLE else flat.get(field.path)
        values[field.key] = problems.run(_read, field, value, stack)
    access: AccessSettings = problems.run(access_settings, values)
    problems.check()
    return access


def _read_all(raw: Mapping[str, Any], secret_keys: frozenset[str], problems: Problems, stack: str) -> Values:
    """Every field's typed value, ``UNREADABLE`` where it failed (its problem kept in ``problems``)."""
    refused = _check_keys(raw, secret_keys, problems, stack)
    tops = dict.fromkeys(f.top for f in FIELDS)
    values = Values()
    for top in tops:
        if top in refused:  # never read further (a token-shaped or secret value): its one line is kept
            values.update(dict.fromkeys((f.key for f in fields_of(top)), UNREADABLE))
            continue
        present = raw.get(top)  # absent, null and "" all mean: the default
        flat = problems.run(_flatten, top, present, problems, stack)
        for field in fields_of(top):
            if flat is UNREADABLE:
                values[field.key] = UNREADABLE
                continue
            value = flat.get(field.path) if field.path else present
            # Set but encrypted (the offline tools never decrypt): counts as set, never read as a value.
            encrypted = field.secret and value in OFFLINE_SECRETS
            values[field.key] = value if encrypted else problems.run(_read, field, value, stack)
    for key, flag in ((TOKEN_KEY, "hfTokenSet"), (WRITE_TOKEN_KEY, "hfWriteTokenSet")):
        token = values.get(key)  # `get` never raises: an unreadable token leaves its flag unreadable
        values[flag] = UNREADABLE if token is UNREADABLE else token not in (None, "")
    for key in SECRET_KEYS:
        del values[key]  # a token itself never travels further than this check
    return values


def _check_keys(raw: Mapping[str, Any], secret_keys: frozenset[str], problems: Problems, stack: str) -> set[str]:
    """Problems of the keys themselves; returns the keys whose values must not be read any further."""
    set_token = pulumi_config_set(stack, TOKEN_KEY, secret=True)
    refused: set[str] = set()
    for key in sorted(raw):
        if key in SECRET_KEYS or not (key.startswith(f"{PROJECT}:") or key.startswith("gcp:")):
            continue
        where = _token_path(_decoded(raw[key]), key)
        if where:
            refused.add(key)
            problems.add(
                ConfigError(
                    f"{where} holds a value that looks like a Hugging Face token (not shown): the token belongs "
                    f"in tpu-rl:hfToken only, set with `{set_token}`"
                )
            )
    for key in sorted(raw):
        if not key.startswith(f"{PROJECT}:") or key in refused:
            continue
        name = key.split(":", 1)[1]
        if name not in PROJECT_KEYS:
            typed = unicodedata.normalize("NFKC", name)  # a full-width letter typed for an ASCII one
            hint = [typed] if typed in PROJECT_KEYS else difflib.get_close_matches(name, PROJECT_KEYS, n=1)
            odd = ", ".join(repr(c) for c in dict.fromkeys(c for c in name if not c.isascii()))
            suggestion = f"did you mean {PROJECT}:{hint[0]}? " if hint else ""
            suggestion += f"({odd} not ASCII) " if odd else ""
            problems.add(
                error(
                    key,
                    Hidden("value") if key in secret_keys else "(set)",
                    f"unknown key; {suggestion}known keys: {', '.join(PROJECT_KEYS)}",
                )
            )
            meant = f"{PROJECT}:{hint[0]}" if hint else ""
            if meant and _declared_only(meant, raw.get(meant)):
                # The settings meant for it are under the mistyped key, and the key it meant holds Pulumi.yaml's
                # default (what the CLI hands the program for a key the stack file leaves out): read as unknown,
                # not as that default, so that no rule meets it and says a second line of the one problem.
                refused.add(meant)
        elif key in secret_keys and key not in SECRET_KEYS:
            refused.add(key)
            remove = pulumi_config_rm(stack, key)
            problems.add(
                ConfigError(
                    f"{key} is stored as a secret: only {' and '.join(SECRET_KEYS)} may be secret (a secret anywhere "
                    f"else would reach container arguments in plain text); remove it with `{remove}` "
                    f"and set the token with `{set_token}`"
                )
            )
    for key in SECRET_KEYS:
        token = raw.get(key)
        if token not in (None, "") and key not in secret_keys:
            refused.add(key)
            problems.add(
                ConfigError(
                    f"{key} is stored in plain text: remove it and set it again with "
                    f"`{pulumi_config_set(stack, key, secret=True)}` (the value is not shown)"
                )
            )
    return refused


def _declared_only(top: str, value: Any) -> bool:
    """Whether ``value`` of stack-file key ``top`` is nothing, or no more than what Pulumi.yaml declares as its
    default (``declared_default``): nothing the stack file set itself."""
    value = _decoded(value)
    if value in (None, ""):
        return True
    default = declared_default(top)
    if not isinstance(value, dict):
        return str(value).lower() == str(default).lower()
    return isinstance(default, dict) and all(_at(default, path) == leaf for path, leaf in _leaves(value))


def _leaves(value: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found: list[tuple[tuple[str, ...], Any]] = []
    for name, item in value.items():
        path = (*prefix, str(name))
        found += _leaves(item, path) if isinstance(item, dict) and item else [(path, item)]
    return found


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        value = value.get(name) if isinstance(value, dict) else None
    return value


def _decoded(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "[") and len(value) <= MAX_JSON_CHARS:
        try:
            return parse_json(value, "a config value")
        except InputError:
            return value
    return value


def _token_path(value: Any, path: str) -> str | None:
    if isinstance(value, str):
        return path if HF_TOKEN.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if HF_TOKEN.search(str(key)):
                return path  # the key itself is token-shaped: name its parent, never the key
            found = _token_path(item, f"{path}.{key}")
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _token_path(item, f"{path}[{index}]")
            if found:
                return found
    return None


def _flatten(top: str, value: Any, problems: Problems, stack: str) -> dict[str, Any]:
    """An object-valued key's fields by path (``timeouts.train``); a scalar key's value under ``""``. An unknown
    or malformed field is a problem in ``problems``; the other fields are still read."""
    if not is_object(top):
        return {}
    if value in (None, ""):
        return {}
    expected = (
        f"expected an object (set each field by its path: `{pulumi_config_set(stack, f'{top}.<field>', '<value>')}`)"
    )
    if isinstance(value, str):
        if value[:1] != "{":
            raise error(top, value, expected)
        if len(value) > MAX_JSON_CHARS:
            raise error(top, Hidden("too long"), f"at most {MAX_JSON_CHARS} characters of JSON")
        try:
            value = parse_json(value, "the JSON")
        except InputError as err:
            raise error(top, value, f"malformed JSON{_why(err)}; expected an object") from None
    if not isinstance(value, dict):
        raise error(top, value, expected)
    known = {f.path: f for f in fields_of(top)}
    flat: dict[str, Any] = {}

    def walk(obj: dict[str, Any], prefix: str) -> None:
        for name, item in obj.items():
            path = f"{prefix}{name}"
            if path in known:
                flat[path] = item
            elif any(k.startswith(f"{path}.") for k in known):
                if item in (None, ""):
                    continue
                if not isinstance(item, dict):
                    problems.add(error(f"{top}.{path}", item, "expected an object"))
                    flat.update({k: UNREADABLE for k in known if k.startswith(f"{path}.")})
                    continue
                walk(item, f"{path}.")
            else:
                siblings = sorted({k[len(prefix) :].split(".", 1)[0] for k in known if k.startswith(prefix)})
                hint = difflib.get_close_matches(str(name), siblings, n=1)
                suggestion = f"did you mean {hint[0]}? " if hint else ""
                problems.add(
                    error(f"{top}.{path}", item, f"unknown field; {suggestion}known fields: {', '.join(siblings)}")
                )

    walk(value, "")
    return flat


def _read(field: Field, value: Any, stack: str) -> Any:
    if value is None or value == "":
        if field.default is REQUIRED:
            raise error(field.key, None, f"required; set it with `{pulumi_config_set(stack, field.key, '<value>')}`")
        if field.default is DERIVED:
            return None
        if field.default == "":
            return ""
        value = field.default
    if field.read is MAXTEXT_ARGS:
        return read_extra_args(field.key, value)
    if field.read is NETWORKS:
        return read_networks(field.key, value)
    if field.read is REGISTRIES:
        return read_registries(field.key, value)
    if field.read is IAM_MEMBERS:
        return read_members(field.key, value)
    if not field.path:
        value = _decoded(value)  # `[]` or `{}` for a scalar key is a list or object, refused as such
    if field.secret:  # refused without its value, even one that looks like no token (a paste with a space in it)
        try:
            return field.read(field.key, value)
        except ConfigError:
            raise error(field.key, Hidden("value"), field.read.describe()) from None  # type: ignore[attr-defined]
    return field.read(field.key, value)


# ---------------------------------------------------------------------------------------------
# training.extraArgs: more MaxText key=value pairs, checked against MaxText 0.2.5's keys

# Keys extraArgs may not set, each with the reason (docs/configuration.md "Refused extraArgs keys"; MaxText 0.2.5
# configs/types.py RLConfig derives checkpoint_dir and tensorboard_dir from base_output_directory and run_name;
# train_rl.py 368 saves nothing without enable_checkpointing).
REFUSED_KEYS: dict[str, str] = {
    "run_name": "the program sets it (rl): a retry resumes from the run's rl/checkpoints/, another name starts over",
    "base_output_directory": "the step's content-addressed output path, set by the program",
    "load_parameters_path": "the conversion's checkpoint, set by the program",
    "checkpoint_dir": "MaxText derives it from base_output_directory and run_name (a value is ignored)",
    "tensorboard_dir": "MaxText derives it from base_output_directory and run_name (a value is ignored)",
    "enable_checkpointing": (
        "without checkpoints a restart starts over and there is nothing to export (the whole TPU run is lost)"
    ),
    "checkpoint_storage_use_ocdbt": "must match how the conversion wrote the checkpoint training reads (no OCDBT)",
    "checkpoint_storage_use_zarr3": "must match how the conversion wrote the checkpoint training reads (zarr v2)",
    "model_name": "set by the program from tpu-rl:model.name",
    "tokenizer_path": "set by the program: the base's files at the converted commit, fetched into the pod",
    "scan_layers": "set by the program (the conversion writes unscanned layers)",
    "hf_access_token": "the token comes from the Kubernetes Secret (HF_TOKEN); never put it in arguments",
    "data_template_path": "set by the program from tpu-rl:training.dataset",
    "dataset_name": "set by the program from tpu-rl:training.dataset",
    "eval_dataset_name": "set by the program from tpu-rl:training.dataset",
    "hf_train_files": "set by the program from tpu-rl:training.dataset",
    "train_split": "set by the program from tpu-rl:training.dataset",
    "hf_eval_files": "set by the program from tpu-rl:training.dataset",
    "eval_split": "set by the program from tpu-rl:training.dataset",
    "vllm_hf_overrides": "set by the program (the tutorial's MaxTextForCausalLM override)",
    "vllm_additional_config": "set by the program from the model and the vLLM knobs",
    "num_trainer_slices": "set by the program from tpu-rl:tpu.slices (two: the trainer on one, the samplers on one)",
    "num_samplers_slices": "set by the program from tpu-rl:tpu.slices (two: the trainer on one, the samplers on one)",
    "inference_benchmark_test": (
        "set by the program with tpu-rl:tpu.slices 2: MaxText 0.2.5's create_device_mesh counts each side's mesh as "
        "one slice only with it (RLConfig sets num_slices to -1 there)"
    ),
    "rollout_data_parallelism": (
        "set by the program with tpu-rl:tpu.slices 2 (1: one sampler replica, maxtext#2702); on one slice MaxText "
        "derives it, the sampler's chips over rollout TP x EP"
    ),
}
"""MaxText keys ``training.extraArgs`` refuses: the program sets them, or they break the workflow."""
PROGRAM_KEYS = frozenset(REFUSED_KEYS)


# extraArgs the program itself interprets (the final step; the report), read like typed knobs.
INTERPRETED = {
    "rl.num_iterations": Integer(1, 1000),
    "train_fraction": Number(0.0, 1.0, exclusive_low=True),
    "num_epoch": Integer(1, 1000),
    "eval_interval": Integer(0, 100_000),
    "num_test_batches": Integer(0, 100_000),
}
GENERIC_INT = Integer(-(2**31), 2**31 - 1)
GENERIC_FLOAT = Number(-1e15, 1e15)
SAFE_TEXT = re.compile(r"[A-Za-z0-9_.,:/=+@%*-]{1,256}")
KEY_SHAPE = re.compile(r"[a-z_][a-z0-9_]{0,79}(\.[a-z_][a-z0-9_]{0,79})?")


def _why(err: InputError) -> str:
    """The reason ``parse_json`` gave, when it says more than "not JSON" (too deep, too many digits)."""
    detail = str(err).removeprefix("the JSON is ")
    return "" if detail == "not JSON" else f" ({detail})"


def _flat_args(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        if value[:1] != "{":
            raise error(key, value, "an object of MaxText key: value pairs")
        try:
            value = parse_json(value, "the JSON")
        except InputError as err:
            raise error(
                key, value, f"malformed JSON{_why(err)}; expected an object of MaxText key: value pairs"
            ) from None
    if not isinstance(value, dict):
        raise error(key, value, "an object of MaxText key: value pairs")
    flat: dict[str, Any] = {}
    for name, item in value.items():
        # `pulumi config set --path 'tpu-rl:training.extraArgs.rl.num_iterations' 2` nests rl: {num_iterations: 2}.
        if isinstance(item, dict) and item:
            for sub, sub_item in item.items():
                flat[f"{name}.{sub}"] = sub_item
        else:
            flat[str(name)] = item
    return flat


def read_extra_args(key: str, value: Any) -> dict[str, str]:
    """``extraArgs`` as MaxText argv text, every key known to MaxText 0.2.5 and every value of its type (one
    ``ConfigError`` with a line for each key that is not)."""
    problems = Problems()
    table, typed = known_keys(), _knob_keys()
    out: dict[str, str] = {}
    for name, item in _flat_args(key, value).items():
        out[name] = problems.run(_extra_arg, f"{key}.{name}", name, item, table, typed)
    problems.check()
    return dict(sorted(out.items()))


def _extra_arg(full: str, name: str, item: Any, table: dict[str, str], typed: dict[str, str]) -> str:
    if not KEY_SHAPE.fullmatch(name):
        raise error(full, item, "MaxText keys are lowercase snake_case, e.g. eval_interval or rl.num_iterations")
    if name in REFUSED_KEYS:
        raise error(full, item, f"not settable in extraArgs: {REFUSED_KEYS[name]}")
    if name in typed:
        raise error(full, item, f"use the typed field tpu-rl:training.{typed[name]}")
    if name in refused_keys():  # MaxText's loader takes it, but the run would not use it as written
        raise error(full, item, f"not settable in extraArgs: {refused_keys()[name]}")
    if name not in table:
        near = closest_key(name)
        hint = f"did you mean {near}? " if near else ""
        raise error(
            full,
            item,
            f"{hint}MaxText {_version()} has no such key (an unknown rl.* key is ignored "
            "silently by MaxText, so it is refused here)",
        )
    return _render_extra(full, item, table[name], INTERPRETED.get(name))


def _version() -> str:
    from core.maxtext_keys import MAXTEXT_VERSION

    return MAXTEXT_VERSION


def _knob_keys() -> dict[str, str]:
    from core.knobs import TRAINING_KNOBS

    return {knob.key: knob.field for knob in TRAINING_KNOBS}


def _render_extra(key: str, value: Any, kind: str, interpreted: Any) -> str:
    from core.config.values import Boolean
    from core.knobs import format_float

    if value is None or value == "":
        raise error(key, value, "expected a value (remove the key to use MaxText's default)")
    if kind in ("list", "dict"):
        raise error(
            key,
            value,
            f"MaxText {_version()} takes {'a list' if kind == 'list' else 'an object'} here; "
            "structured values are not supported in extraArgs",
        )
    if isinstance(value, (dict, list)):
        raise error(key, value, f"expected one value, not {'an object' if isinstance(value, dict) else 'a list'}")
    if interpreted is not None:
        return format_float(interpreted(key, value))  # an int's repr is its digits
    if kind == "bool":
        return "true" if Boolean()(key, value) else "false"
    if kind == "int":
        return str(GENERIC_INT(key, value))
    if kind == "float":
        return format_float(GENERIC_FLOAT(key, value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_float(GENERIC_FLOAT(key, value))
    text = str(value)
    if not SAFE_TEXT.fullmatch(text):
        raise error(key, value, "values may use letters, digits and _ . , : / = + @ % * - only (at most 256)")
    return text
