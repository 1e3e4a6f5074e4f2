"""Every built-in provider keeps the contract: registered under its kind, options typed,
secrets never printable."""

from __future__ import annotations

import typing

import pytest
from pydantic import SecretStr

from noti.core.record import Channel
from noti.providers import BUILTIN, ProviderOptions, load_kind
from noti.providers.base import Provider

SECRET_WORDS = ("secret", "password", "token", "access_key", "api_key", "receipt_key")


def _is_secret_type(annotation: object) -> bool:
    if annotation is SecretStr:
        return True
    return any(_is_secret_type(arg) for arg in typing.get_args(annotation))


@pytest.mark.parametrize("kind", sorted(BUILTIN))
def test_builtin_kinds_load_and_declare_themselves(kind: str) -> None:
    cls = load_kind(kind)
    assert issubclass(cls, Provider)
    assert cls.kind == kind
    assert cls.channels and set(cls.channels) <= set(Channel)
    assert issubclass(cls.Options, ProviderOptions)
    assert cls.__doc__, f"{kind}: the class docstring says what it sends through"


@pytest.mark.parametrize("kind", sorted(BUILTIN))
def test_secret_options_are_secret_strings(kind: str) -> None:
    options = load_kind(kind).Options
    for name, field in options.model_fields.items():
        if any(word in name for word in SECRET_WORDS) and not name.endswith(("_id", "_url", "_ttl_s")):
            assert _is_secret_type(field.annotation), f"{kind}.{name} must be a SecretStr"


def test_kinds_are_unique_per_class() -> None:
    classes = [load_kind(kind) for kind in BUILTIN]
    assert len({c.kind for c in classes}) == len(classes)
