"""What the Hub checks read of the Hub's replies, typed (``core.boundary``): ``huggingface_hub``'s objects
(``ModelInfo``, ``SafetensorsFileMetadata``) and ``whoami``'s dict hold the JSON's values as they came, so each check
reads a reply through one of these, inside its bounded call (``workloads.preflight``): a field of another shape is
a ``BoundaryError`` naming it, one line with the request (exit 2), never a ``TypeError`` past the check."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from core.boundary import Model, parse
from core.hf_model import Tensor

SHAPE = "a reply of another shape"
"""The source a ``BoundaryError`` of a Hub reply names (``workloads.preflight`` puts the request and the host before
it)."""
Size = Annotated[int, Field(ge=0)]


class Sibling(Model):
    rfilename: str
    size: Size | None = None


class ModelReply(Model):
    """What the checks read of ``model_info``: the commit, the visibility, the licence, the files."""

    sha: str | None = None
    private: bool | None = None
    license: object = None
    """The card's front matter as its author wrote it: a licence that is no text is no licence declared."""
    tags: list[str] | None = None
    siblings: list[Sibling] | None = None


def model_reply(info: Any) -> ModelReply:
    """``model_info``'s ``ModelInfo`` as the checks read it (``card_data`` is the client's ``ModelCardData``, a
    mapping of the card's front matter); ``BoundaryError`` naming the field of another shape."""
    card = getattr(info, "card_data", None)
    siblings = getattr(info, "siblings", None)
    return parse(
        ModelReply,
        {
            "sha": getattr(info, "sha", None),
            "private": getattr(info, "private", None),
            "license": card.get("license") if card is not None and hasattr(card, "get") else None,
            "tags": getattr(info, "tags", None),
            "siblings": [{"rfilename": f.rfilename, "size": f.size} for f in siblings]
            if isinstance(siblings, list)
            else siblings,
        },
        SHAPE,
    )


class _TensorReply(Model):
    dtype: str
    shape: list[Size]


class _HeaderReply(Model):
    tensors: dict[str, _TensorReply]


def header_reply(found: Any) -> dict[str, Tensor]:
    """``parse_safetensors_file_metadata``'s tensors as ``core.hf_model.Tensor`` (dtype, shape of non-negative
    whole numbers); ``BoundaryError`` naming the tensor and the field of another shape."""
    tensors = getattr(found, "tensors", None)
    raw = (
        {str(n): {"dtype": t.dtype, "shape": t.shape} for n, t in tensors.items()}
        if isinstance(tensors, dict)
        else tensors
    )
    header = parse(_HeaderReply, {"tensors": raw}, SHAPE)
    return {name: Tensor(t.dtype, tuple(t.shape)) for name, t in header.tensors.items()}


class _Entity(Model):
    type: str | None = None
    name: str | None = None


class _Grant(Model):
    entity: _Entity = _Entity()
    permissions: list[str] | None = None


class _FineGrained(Model):
    scoped: list[_Grant] | None = None


class _AccessToken(Model):
    role: str | None = None
    fine_grained: _FineGrained | None = None


class _Auth(Model):
    access_token: _AccessToken | None = None


class _Org(Model):
    name: str | None = None
    role_in_org: str | None = None


class Account(Model):
    """What ``/api/whoami-v2`` says of the token's account that the publication's check reads: its name, its
    organizations and roles, and the token's role and fine-grained scopes."""

    name: str | None = None
    orgs: list[_Org] | None = None
    auth: _Auth = _Auth()


def account(whoami: Any) -> Account:
    """``whoami``'s reply as an ``Account``; ``BoundaryError`` naming the field of another shape."""
    return parse(Account, whoami, SHAPE)
