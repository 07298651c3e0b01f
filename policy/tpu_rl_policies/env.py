"""What a container gets from the stack's own objects: environment variables, as the kubelet makes them
(pkg/kubelet/kubelet_pods.go makeEnvironmentVariables), and files from ConfigMap volumes, as the kubelet mounts them
(pkg/volume/configmap); and its argv as the kubelet starts it."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .pods import _namespace
from .properties import UNKNOWN, Unseen, _l, _m, _Unknown, unseen
from .resources import CONFIG_MAP, SECRET, Resource


@dataclass(frozen=True)
class EnvValue:
    """One environment variable of a container: its value (``UNKNOWN`` where the policy cannot see it), where it
    comes from (``ConfigMap x``, ``Secret y``, ``literal``, ``fieldRef``...), and of which kind."""

    value: Any
    source: str
    kind: str
    """``literal``, ``ConfigMap``, ``Secret`` or ``runtime`` (fieldRef, resourceFieldRef, fileKeyRef)."""
    from_env_from: bool = False


@dataclass
class ContainerEnv:
    values: dict[str, EnvValue] = field(default_factory=dict)
    unseen: list[str] = field(default_factory=list)
    """``envFrom`` sources this stack does not declare: any variable may come from them."""


class StackObjects:
    """The stack's ConfigMaps and Secrets by kind, name and namespace, with their data as text."""

    def __init__(self, resources: Sequence[Resource]) -> None:
        self._objects: dict[tuple[str, str], list[tuple[str | None, Any]]] = {}
        for r in resources:
            if r.resource_type not in (CONFIG_MAP, SECRET):
                continue
            name = _m(r.props.get("metadata")).get("name")
            if not isinstance(name, str):
                continue
            kind = "ConfigMap" if r.resource_type == CONFIG_MAP else "Secret"
            data = _config_map_data(r.props) if kind == "ConfigMap" else _secret_data(r.props)
            self._objects.setdefault((kind, name), []).append((_namespace(r.props), data))

    def find(self, kind: str, name: Any, namespace: str | None) -> Any:
        """The data of the one object of this kind and name in the namespace (an ``Unseen`` where which keys it
        holds is not known yet), or None (not in the stack, or more than one that could be it)."""
        if not isinstance(name, str):
            return None
        candidates = [
            data
            for ns, data in self._objects.get((kind, name), [])
            if ns is None or namespace is None or ns == namespace
        ]
        return candidates[0] if len(candidates) == 1 else None


def _config_map_data(props: Mapping[str, Any]) -> Any:
    """What a ConfigMap gives the environment: ``data`` (``binaryData`` never reaches env); an ``Unseen`` (noted
    when a container reads it) where the data is not known yet, and each value not known yet stays one."""
    data = props.get("data")
    if isinstance(data, Unseen):
        return data
    return {str(k): v if isinstance(v, (str, Unseen)) else UNKNOWN for k, v in _m(data).items()}


def _secret_data(props: Mapping[str, Any]) -> Any:
    """A Secret's values as text: ``data`` decoded from base64, ``stringData`` over it (the API server merges
    it in on write); an ``Unseen`` where either is not known yet (any key may come from it)."""
    for part in ("data", "stringData"):
        if isinstance(props.get(part), Unseen):
            return props[part]
    out: dict[str, Any] = {}
    for key, value in _m(props.get("data")).items():
        if isinstance(value, Unseen):
            out[str(key)] = value
            continue
        try:
            out[str(key)] = base64.b64decode(value, validate=True).decode("utf-8", "replace")
        except (binascii.Error, TypeError, ValueError):
            out[str(key)] = UNKNOWN
    for key, value in _m(props.get("stringData")).items():
        out[str(key)] = value if isinstance(value, (str, Unseen)) else UNKNOWN
    return out


def expand(text: str, env: Mapping[str, EnvValue], *, keep_unknown: bool = False) -> Any:
    """Kubernetes' ``$(VAR)`` expansion (``third_party/forked/golang/expansion``): ``$(NAME)`` becomes the value
    of an already defined variable, ``$$`` is one ``$``, anything else stays as written. A reference to a
    variable the policy cannot see makes the whole value ``UNKNOWN``, or stays ``$(NAME)`` with
    ``keep_unknown`` (a command's words: the run-time value is nothing this policy could read anyway)."""
    out: list[str] = []
    cursor = 0
    while cursor < len(text):
        char = text[cursor]
        if char != "$" or cursor + 1 >= len(text):
            out.append(char)
            cursor += 1
            continue
        following = text[cursor + 1]
        if following == "$":
            out.append("$")
            cursor += 2
        elif following == "(":
            close = text.find(")", cursor + 2)
            if close < 0:
                out.append("$(")
                cursor += 2
                continue
            name = text[cursor + 2 : close]
            known = env.get(name)
            if known is None:
                out.append(f"$({name})")
            elif isinstance(known.value, str):
                out.append(known.value)
            elif unseen(known.value) and not keep_unknown:
                return known.value
            elif keep_unknown:
                out.append(f"$({name})")
            else:
                return UNKNOWN
            cursor = close + 1
        else:
            out.append("$" + following)
            cursor += 2
    return "".join(out)


def container_env(container: Mapping[str, Any], namespace: str | None, objects: StackObjects) -> ContainerEnv:
    """A container's environment: ``envFrom`` sources in order (a later one wins, each with its prefix), then
    ``env`` entries in order (a later one wins; a value expands the ``$(VAR)`` defined before it; a
    ``configMapKeyRef``/``secretKeyRef`` reads the stack's object, a key it lacks leaves the variable unset)."""
    env = ContainerEnv()
    for source in _l(container.get("envFrom")):
        source = _m(source)
        prefix = source.get("prefix") if isinstance(source.get("prefix"), str) else ""
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key not in source:
                continue
            name = _m(source.get(key)).get("name")
            data = objects.find(kind, name, namespace)
            if data is None or unseen(data):
                env.unseen.append(f"{kind} {name}")
                continue
            for var, value in data.items():
                env.values[f"{prefix}{var}"] = EnvValue(value, f"{kind} {name}", kind, from_env_from=True)
    for entry in _l(container.get("env")):
        entry = _m(entry)
        name = entry.get("name")
        if not isinstance(name, str):
            continue
        value_from = entry.get("valueFrom")
        if value_from is None:
            value = entry.get("value", "")
            if isinstance(value, str):
                text = expand(value, env.values)
            else:
                text = value if isinstance(value, _Unknown) else str(value)
            env.values[name] = EnvValue(text, "literal", "literal")
            continue
        value_from = _m(value_from)
        for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
            if key not in value_from:
                continue
            ref = _m(value_from.get(key))
            data = objects.find(kind, ref.get("name"), namespace)
            source, data_key = f"{kind} {ref.get('name')}", ref.get("key")
            if data is None:
                env.values[name] = EnvValue(UNKNOWN, f"{source}, which this stack does not declare", kind)
            elif isinstance(data, Unseen):
                env.values[name] = EnvValue(data, source, kind)
            elif isinstance(data_key, str) and data_key in data:
                env.values[name] = EnvValue(data[data_key], source, kind)
            # A key the object lacks: an optional reference sets nothing (an earlier value stays), any other
            # keeps the container from starting.
            break
        else:
            env.values[name] = EnvValue(UNKNOWN, "a value the pod gets at run time", "runtime")
    return env


# ---------------------------------------------------------------------------------------------
# Files from ConfigMap volumes, as the kubelet mounts them (pkg/volume/configmap: each key a file named by the key,
# or by its ``items`` path; a ``subPath`` mount shows one file or folder of the volume)


@dataclass(frozen=True)
class MountedFile:
    """A file a container sees at ``path`` from a ConfigMap volume: its text (an ``Unseen`` where the ConfigMap's
    data is not known yet, ``UNKNOWN`` where this policy cannot read it: a ConfigMap the stack does not declare, a
    key it lacks, a value that is not text) and where it comes from."""

    path: str
    text: Any
    source: str


class Mounts:
    """The ConfigMap volumes a container mounts (``configMap`` volumes and the ``configMap`` sources of ``projected``
    ones), to read the files its command names."""

    def __init__(self, spec: Mapping[str, Any], container: Mapping[str, Any], namespace: str | None, objects: Any):
        self._objects = objects
        self._namespace = namespace
        volumes = {v.get("name"): v for v in (_m(v) for v in _l(spec.get("volumes"))) if isinstance(v.get("name"), str)}
        self._mounts: list[tuple[str, str, list[dict[str, Any]]]] = []
        self._paths: list[str | None] = []
        """Where every volume is mounted, of any kind (None: a path this policy cannot read)."""
        for mount in _l(container.get("volumeMounts")):
            mount = _m(mount)
            where, name = mount.get("mountPath"), mount.get("name")
            self._paths.append(where.rstrip("/") or "/" if isinstance(where, str) else None)
            # A volume name not known yet is noted by the lookup (``Unseen.__hash__``).
            if unseen(where) or not isinstance(where, str) or name not in volumes:
                continue
            volume = volumes[name]
            projected = [_m(src).get("configMap") for src in _l(_m(volume.get("projected")).get("sources"))]
            sources = [src for src in map(_m, [volume.get("configMap"), *projected]) if src]
            if sources:
                sub = mount.get("subPath")
                self._mounts.append((where.rstrip("/") or "/", sub.strip("/") if isinstance(sub, str) else "", sources))

    def covering(self, path: str) -> int:
        """How many of the container's volume mounts, of any kind, are at ``path`` or a folder above it (one whose
        path this policy cannot read counts: it may be): more than one, and which file the container sees depends
        on the order the runtime mounts them in."""
        return sum(where is None or path == where or path.startswith(where.rstrip("/") + "/") for where in self._paths)

    def file(self, path: Any) -> MountedFile | None:
        """The file at ``path`` if it is inside a ConfigMap mount (None: it is not; a file of the image or another
        volume)."""
        if not isinstance(path, str) or not path.startswith("/"):
            return None
        for where, sub, sources in self._mounts:
            if path != where and not path.startswith(where.rstrip("/") + "/"):
                continue
            relative = "/".join(part for part in (sub, path[len(where) :].strip("/")) if part)
            for source in sources:
                found = self._in(source, relative)
                if found is not None:
                    return MountedFile(path, *found)
            return MountedFile(path, UNKNOWN, f"a volume of ConfigMap {sources[0].get('name')} without that file")
        return None

    def _in(self, source: Mapping[str, Any], relative: str) -> tuple[Any, str] | None:
        name = source.get("name")
        if unseen(name):
            return name, "a ConfigMap whose name is not known yet"
        data = self._objects.find("ConfigMap", name, self._namespace)
        label = f"ConfigMap {name}"
        if data is None:
            return UNKNOWN, f"{label}, which this stack does not declare"
        if isinstance(data, Unseen):
            return data, label
        items = _l(source.get("items")) if source.get("items") is not None else None
        key: Any = relative
        if items is not None:
            paths = {_m(i).get("path"): _m(i).get("key") for i in items}
            if relative not in paths:
                return None
            key = paths[relative]
        if key not in data:
            return None
        value = data[key]
        return (value if isinstance(value, (str, Unseen)) else UNKNOWN), f"{label} key {key}"

    def files(self) -> list[MountedFile]:
        """Every file of these mounts, named or not: each key of each ConfigMap (by its ``items`` path where it has
        them; inside a ``subPath`` mount, those under it); one ``Unseen`` file per ConfigMap whose data is not known
        yet, one ``UNKNOWN`` per ConfigMap the stack does not declare."""
        found: list[MountedFile] = []
        for where, sub, sources in self._mounts:
            for source in sources:
                name = source.get("name")
                data = name if unseen(name) else self._objects.find("ConfigMap", name, self._namespace)
                label = f"ConfigMap {name}"
                if data is None:
                    found.append(MountedFile(where, UNKNOWN, f"{label}, which this stack does not declare"))
                    continue
                if isinstance(data, Unseen):
                    found.append(MountedFile(where, data, label))
                    continue
                items = _l(source.get("items")) if source.get("items") is not None else None
                paths = (
                    {_m(i).get("path"): _m(i).get("key") for i in items} if items is not None else {k: k for k in data}
                )
                for relative, key in paths.items():
                    if not isinstance(relative, str) or key not in data:
                        continue
                    relative = relative.strip("/")
                    if sub and relative != sub and not relative.startswith(sub + "/"):
                        continue
                    path = where.rstrip("/") + "/" + relative[len(sub) :].strip("/") if sub else f"{where}/{relative}"
                    value = data[key]
                    text = value if isinstance(value, (str, Unseen)) else UNKNOWN
                    found.append(MountedFile(path.replace("//", "/").rstrip("/") or "/", text, f"{label} key {key}"))
        return found

    def run_files(self, words: Sequence[Any]) -> list[MountedFile]:
        """The files of these mounts a command runs: each of its words that is one (``bash /tpu-rl/run.sh``), and
        each path named in the text of those (the programs a script runs)."""
        found: dict[str, MountedFile] = {}
        for word in words:
            mounted = self.file(word)
            if mounted is not None:
                found.setdefault(mounted.path, mounted)
        for mounted in list(found.values()):
            if isinstance(mounted.text, str):
                for named in _PATH_WORD.findall(mounted.text):
                    inner = self.file(named)
                    if inner is not None:
                        found.setdefault(inner.path, inner)
        return list(found.values())


_PATH_WORD = re.compile(r"/[A-Za-z0-9_./-]+")


def _command_words(container: Mapping[str, Any], env: ContainerEnv) -> list[str]:
    """A container's argv as the kubelet starts it: command then args, ``$(VAR)`` expanded."""
    words = []
    for key in ("command", "args"):
        for word in _l(container.get(key)):
            words.append(expand(word, env.values, keep_unknown=True) if isinstance(word, str) else str(word))
    return words
