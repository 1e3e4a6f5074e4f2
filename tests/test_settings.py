"""Settings: environment, TOML file, validation with clear messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from noti.access.users import Role, resolve_user
from noti.config import load_settings
from noti.errors import InvalidConfig
from tests.config_files import use_config

pytestmark = pytest.mark.bounds


def test_defaults_match_the_documentation(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NOTI_REDIS_URL", "NOTI_ROOT_ADMINS", "NOTI_ROOT_MEMBERS", "NOTI_USER"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.redis_url == "redis://127.0.0.1:6379/0"
    assert settings.broker == settings.redis_url
    assert settings.key_prefix == "noti:"
    assert settings.retry_max == 3 and settings.keep_done_s == 3 * 86400
    assert settings.user  # the OS user


def test_environment_lists_and_nested_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTI_ROOT_ADMINS", "zoe, max ,")
    monkeypatch.setenv("NOTI_ROOT_MEMBERS", "ann")
    monkeypatch.setenv("NOTI_CHANNELS__SMS__PROVIDER", "aliyun,tencent")
    monkeypatch.setenv("NOTI_BROKER_URL", "redis://127.0.0.1:6379/5")
    settings = load_settings()
    assert settings.root_admins == ["zoe", "max"]
    assert settings.channel("sms").provider == "aliyun,tencent"
    assert settings.channel("email").provider is None
    assert settings.broker == "redis://127.0.0.1:6379/5"
    assert resolve_user(settings, "max").role is Role.ROOT_ADMIN
    assert resolve_user(settings, "ann").role is Role.ROOT_MEMBER
    assert resolve_user(settings, "joe").role is Role.USER


def test_toml_file_holds_provider_tables_and_env_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_config(
        monkeypatch,
        tmp_path / "noti.toml",
        'retry_max = 5\nuser = "file-user"\n'
        '[channels.sms]\nprovider = "flaky"\n'
        '[providers.flaky]\nkind = "sandbox"\nfail_first = 2\n',
    )
    monkeypatch.setenv("NOTI_USER", "env-user")
    settings = load_settings()
    assert settings.retry_max == 5 and settings.user == "env-user"
    assert settings.providers["flaky"] == {"kind": "sandbox", "fail_first": 2}


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"NOTI_RETRY_MAX": "lots"}, "NOTI_RETRY_MAX"),
        ({"NOTI_RETRY_MAX": "0"}, "NOTI_RETRY_MAX"),
        ({"NOTI_LEASE_TIMEOUT_S": "9999"}, "NOTI_LEASE_TIMEOUT_S"),
        ({"NOTI_KEY_PREFIX": "has space"}, "NOTI_KEY_PREFIX"),
        ({"NOTI_WORKER_POOL": "fibers"}, "NOTI_WORKER_POOL"),
        ({"NOTI_CONFIG": "/nonexistent/noti.toml"}, "not a file"),
    ],
)
def test_bad_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], fragment: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(InvalidConfig) as info:
        load_settings()
    assert fragment in info.value.message


def test_a_broken_toml_file_is_an_invalid_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    use_config(monkeypatch, tmp_path / "bad.toml", "retry_max = [unclosed\n")
    with pytest.raises(InvalidConfig):
        load_settings()


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("retry_maxx = 5\n", "unknown setting 'retry_maxx' in {file} (did you mean 'retry_max'?)"),
        ('[channels.sms]\nprovder = "sandbox"\n', "unknown setting 'channels.sms.provder' in {file} "),
        (
            "[webman]\nenabeld = true\n",
            "unknown setting 'webman.enabeld' in {file} (did you mean 'enabled'?)",
        ),
        ("zzz = 1\n", "unknown setting 'zzz' in {file}"),
    ],
)
def test_an_unknown_key_in_the_toml_file_is_refused_with_its_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, toml: str, message: str
) -> None:
    # a misspelt key used to be ignored in silence: the setting it meant kept its default
    config = use_config(monkeypatch, tmp_path / "noti.toml", toml)
    with pytest.raises(InvalidConfig) as info:
        load_settings()
    assert info.value.message.startswith(message.format(file=config)), info.value.message


def test_other_tools_noti_variables_are_not_settings_and_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTI_FLOWER_PORT", "5555")  # make run's
    monkeypatch.setenv("NOTI_TEST_REDIS_URL", "redis://127.0.0.1:1/0")  # the test suite's
    assert load_settings().retry_max == 3
    monkeypatch.setenv("NOTI_CHANNELS__SMS__PROVDER", "sandbox")  # but a misspelt nested one is
    with pytest.raises(InvalidConfig, match="channels.sms.provder"):
        load_settings()


def test_bad_provider_options_are_refused_when_used(configure: object) -> None:
    rt = configure(providers={"odd": {"kind": "sandbox", "colour": "blue"}})  # type: ignore[operator]
    with pytest.raises(InvalidConfig) as info:
        rt.providers.get("odd")
    assert "[providers.odd]" in info.value.message and "colour" in info.value.message
    with pytest.raises(InvalidConfig):
        rt.providers.get("nosuchkind")
