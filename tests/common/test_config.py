from __future__ import annotations

import os
from dataclasses import FrozenInstanceError, dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from rocketq.common.config import (
    StoreConfig,
    config_to_dict,
    dump_toml,
    load_config,
    validate_config,
)
from rocketq.common.exceptions import ConfigError


def write(tmp_path: Path, text: str, name: str = "broker.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load(path: Path | None = None, **kwargs: object) -> StoreConfig:
    """Load a StoreConfig with an empty environment unless the test passes one."""
    env = kwargs.pop("env", {})
    return load_config(StoreConfig, path, env=env, **kwargs)  # type: ignore[arg-type]


# --- defaults and derived paths ---------------------------------------------------------


def test_defaults_are_rocketmqs() -> None:
    cfg = load()
    assert cfg == StoreConfig()
    assert cfg.store_path_root_dir == str(Path.home() / "store")
    assert cfg.mapped_file_size_commit_log == 1073741824
    assert cfg.mapped_file_size_consume_queue == 6000000
    assert cfg.max_message_size == 4194304
    assert cfg.flush_disk_type == "ASYNC_FLUSH"
    assert cfg.flush_interval_commit_log == 500
    assert cfg.file_reserved_time == 72
    assert cfg.delete_when == "04"
    assert cfg.disk_max_used_space_ratio == 75
    assert cfg.disk_space_clean_forcibly_ratio == 0.85
    assert cfg.message_index_enable is True
    assert cfg.store_host == "127.0.0.1:10911"


def test_derived_paths_default_under_root() -> None:
    cfg = StoreConfig(store_path_root_dir="/data/store")
    assert cfg.commit_log_dir == os.path.join("/data/store", "commitlog")
    assert cfg.consume_queue_dir == os.path.join("/data/store", "consumequeue")
    assert cfg.index_dir == os.path.join("/data/store", "index")
    assert cfg.checkpoint_path == os.path.join("/data/store", "checkpoint")
    assert cfg.abort_path == os.path.join("/data/store", "abort")
    assert cfg.config_dir == os.path.join("/data/store", "config")


def test_explicit_paths_win_over_root() -> None:
    cfg = StoreConfig(
        store_path_root_dir="/r",
        store_path_commit_log="/fast/cl",
        store_path_consume_queue="/fast/cq",
        store_path_index="/slow/idx",
    )
    assert (cfg.commit_log_dir, cfg.consume_queue_dir, cfg.index_dir) == (
        "/fast/cl",
        "/fast/cq",
        "/slow/idx",
    )


def test_delete_hours() -> None:
    assert StoreConfig().delete_hours == (4,)
    assert StoreConfig(delete_when="01;04;23").delete_hours == (1, 4, 23)
    assert StoreConfig(delete_when="0").delete_hours == (0,)


def test_config_is_frozen() -> None:
    cfg = StoreConfig()
    with pytest.raises(FrozenInstanceError):
        cfg.max_message_size = 1  # type: ignore[misc]


# --- layers and precedence --------------------------------------------------------------


def test_file_top_level(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'store_path_root_dir = "/srv/rq"\n'
        'flush_disk_type = "SYNC_FLUSH"\n'
        "max_message_size = 1024\n"
        "message_index_enable = false\n"
        "disk_space_clean_forcibly_ratio = 0.5\n",
    )
    cfg = load(path)
    assert cfg.store_path_root_dir == "/srv/rq"
    assert cfg.flush_disk_type == "SYNC_FLUSH"
    assert cfg.max_message_size == 1024
    assert cfg.message_index_enable is False
    assert cfg.disk_space_clean_forcibly_ratio == 0.5
    assert cfg.sync_flush_timeout == 5000  # untouched keys keep their defaults


def test_file_accepts_int_for_float_field(tmp_path: Path) -> None:
    cfg = load(write(tmp_path, "disk_space_clean_forcibly_ratio = 1\n"))
    assert cfg.disk_space_clean_forcibly_ratio == 1.0
    assert isinstance(cfg.disk_space_clean_forcibly_ratio, float)


def test_file_section_ignores_other_tables(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'broker_name = "broker-a"\n'
        "[namesrv]\n"
        "listen_port = 9876\n"
        "[store]\n"
        "max_message_size = 2048\n"
        'delete_when = "01;04"\n',
    )
    cfg = load(path, section="store")
    assert cfg.max_message_size == 2048
    assert cfg.delete_hours == (1, 4)


def test_file_without_the_section_gives_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "[namesrv]\nlisten_port = 9876\n")
    assert load(path, section="store") == StoreConfig()


def test_section_that_is_not_a_table(tmp_path: Path) -> None:
    path = write(tmp_path, "store = 3\n")
    with pytest.raises(ConfigError, match=r"broker\.toml: 'store' must be a table; .*\[store\]"):
        load(path, section="store")


def test_env_overrides_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'flush_disk_type = "ASYNC_FLUSH"\nmax_message_size = 10\n')
    env = {
        "ROCKETQ_FLUSH_DISK_TYPE": "SYNC_FLUSH",
        "ROCKETQ_MESSAGE_INDEX_ENABLE": "No",
        "ROCKETQ_DISK_SPACE_WARNING_LEVEL_RATIO": "0.95",
        "ROCKETQ_STORE_PATH_ROOT_DIR": "/env/store",
        "PATH": "/usr/bin",  # variables without the prefix are none of our business
    }
    cfg = load(path, env=env)
    assert cfg.flush_disk_type == "SYNC_FLUSH"
    assert cfg.max_message_size == 10  # the file still wins over the default
    assert cfg.message_index_enable is False
    assert cfg.disk_space_warning_level_ratio == 0.95
    assert cfg.store_path_root_dir == "/env/store"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        *[("true", True), ("TRUE", True), ("1", True), ("yes", True), ("Yes", True)],
        *[("false", False), ("False", False), ("0", False), ("no", False), ("NO", False)],
    ],
)
def test_env_bool_spellings(raw: str, expected: bool) -> None:
    cfg = load(env={"ROCKETQ_CHECK_CRC_ON_RECOVER": raw})
    assert cfg.check_crc_on_recover is expected


def test_env_int_allows_underscores() -> None:
    assert load(env={"ROCKETQ_MAX_INDEX_NUM": "1_000"}).max_index_num == 1000


def test_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(os.environ):
        if var.startswith("ROCKETQ_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("ROCKETQ_FLUSH_DISK_TYPE", "SYNC_FLUSH")
    assert load_config(StoreConfig).flush_disk_type == "SYNC_FLUSH"


def test_overrides_win_over_env_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, "max_message_size = 10\nsync_flush_timeout = 7\n")
    cfg = load(
        path,
        env={"ROCKETQ_MAX_MESSAGE_SIZE": "20", "ROCKETQ_SYNC_FLUSH_TIMEOUT": "8"},
        overrides={"max_message_size": 30, "sync_flush_timeout": None},
    )
    assert cfg.max_message_size == 30
    assert cfg.sync_flush_timeout == 8  # a None override leaves the env value alone


def test_overrides_accept_dashed_names_and_text() -> None:
    cfg = load(overrides={"flush-disk-type": "SYNC_FLUSH", "max-message-size": "2048"})
    assert cfg.flush_disk_type == "SYNC_FLUSH"
    assert cfg.max_message_size == 2048


def test_non_strict_env_ignores_unknown_variables() -> None:
    env = {"ROCKETQ_BROKER_NAME": "broker-a", "ROCKETQ_MAX_MESSAGE_SIZE": "99"}
    cfg = load(env=env, strict_env=False)
    assert cfg.max_message_size == 99


# --- errors: every one names where, what and how to fix it -----------------------------


def test_unknown_file_key_suggests_close_match(tmp_path: Path) -> None:
    path = write(tmp_path, 'flush_disk_typ = "SYNC_FLUSH"\n')
    with pytest.raises(ConfigError) as info:
        load(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: unknown key 'flush_disk_typ'")
    assert "did you mean flush_disk_type?" in msg


def test_unknown_file_key_lists_known_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "zzz = 1\n")
    with pytest.raises(ConfigError) as info:
        load(path)
    msg = str(info.value)
    assert f"{path}: unknown key 'zzz'" in msg
    assert "known keys: store_path_root_dir, " in msg
    assert "store_host" in msg


def test_other_tables_are_unknown_keys_without_section(tmp_path: Path) -> None:
    path = write(tmp_path, "[store]\nmax_message_size = 1\n")
    with pytest.raises(ConfigError, match=r"unknown key 'store'"):
        load(path)


def test_unknown_key_in_section_names_the_section(tmp_path: Path) -> None:
    path = write(tmp_path, "[store]\nmax_mesage_size = 1\n")
    with pytest.raises(ConfigError) as info:
        load(path, section="store")
    assert str(info.value).startswith(f"{path} [store]: unknown key 'max_mesage_size'")
    assert "did you mean max_message_size" in str(info.value)


def test_unknown_env_variable_suggests_variable_name() -> None:
    with pytest.raises(ConfigError) as info:
        load(env={"ROCKETQ_FLUSH_DISK_TYP": "SYNC_FLUSH"})
    msg = str(info.value)
    assert msg.startswith("environment variable ROCKETQ_FLUSH_DISK_TYP: unknown key")
    assert "did you mean ROCKETQ_FLUSH_DISK_TYPE?" in msg


def test_lowercase_env_variable_is_unknown() -> None:
    with pytest.raises(ConfigError, match="did you mean ROCKETQ_FLUSH_DISK_TYPE"):
        load(env={"ROCKETQ_flush_disk_type": "SYNC_FLUSH"})


def test_unknown_flag_suggests_flag_name() -> None:
    with pytest.raises(ConfigError) as info:
        load(overrides={"max-mesage-size": 5})
    msg = str(info.value)
    assert msg.startswith("flag --max-mesage-size: unknown key")
    assert "did you mean --max-message-size?" in msg


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('max_message_size = "4M"', 'max_message_size = "4M": must be an integer'),
        ("max_message_size = true", "max_message_size = true: must be an integer"),
        ("max_message_size = 1.5", "max_message_size = 1.5: must be an integer"),
        ('message_index_enable = "yes"', 'message_index_enable = "yes": must be true or false'),
        ("message_index_enable = 1", "message_index_enable = 1: must be true or false"),
        ("store_path_root_dir = 5", "store_path_root_dir = 5: must be a string"),
        ("disk_space_clean_forcibly_ratio = true", "must be a number"),
        ("delete_when = [4]", "delete_when = [4]: must be a string"),
    ],
)
def test_wrong_type_in_file(tmp_path: Path, line: str, expected: str) -> None:
    path = write(tmp_path, line + "\n")
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value).startswith(f"{path}: ")
    assert expected in str(info.value)


def test_wrong_type_names_the_default(tmp_path: Path) -> None:
    path = write(tmp_path, 'max_message_size = "4M"\n')
    with pytest.raises(ConfigError, match=r"\(default 4194304\)"):
        load(path)


def test_wrong_type_in_env() -> None:
    with pytest.raises(ConfigError) as info:
        load(env={"ROCKETQ_MAX_MESSAGE_SIZE": "4M"})
    assert str(info.value).startswith(
        'environment variable ROCKETQ_MAX_MESSAGE_SIZE = "4M": must be an integer'
    )


def test_wrong_bool_in_env_lists_spellings() -> None:
    with pytest.raises(ConfigError, match="must be one of true, false, 1, 0, yes, no"):
        load(env={"ROCKETQ_MESSAGE_INDEX_ENABLE": "maybe"})


def test_wrong_type_in_flag() -> None:
    with pytest.raises(ConfigError, match=r"^flag --max-message-size = true: must be an integer"):
        load(overrides={"max_message_size": True})


def test_bad_literal_in_file_lists_allowed_values(tmp_path: Path) -> None:
    path = write(tmp_path, 'flush_disk_type = "SYNC"\n')
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value).startswith(
        f'{path}: flush_disk_type = "SYNC": must be one of ASYNC_FLUSH, SYNC_FLUSH'
    )


def test_bad_literal_in_env_and_flag() -> None:
    with pytest.raises(ConfigError, match=r"ROCKETQ_FLUSH_DISK_TYPE.*ASYNC_FLUSH, SYNC_FLUSH"):
        load(env={"ROCKETQ_FLUSH_DISK_TYPE": "sync"})
    with pytest.raises(ConfigError, match=r"--flush-disk-type.*ASYNC_FLUSH, SYNC_FLUSH"):
        load(overrides={"flush_disk_type": "SYNC"})


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("disk_max_used_space_ratio = 96", "must be between 10 and 95"),
        ("disk_max_used_space_ratio = 9", "must be between 10 and 95"),
        ("disk_space_clean_forcibly_ratio = 1.5", "must be between 0.1 and 1.0"),
        ("max_message_size = 0", "max_message_size = 0: must be at least 1"),
        ("mapped_file_size_commit_log = 100", "must be at least 4096"),
        ("file_reserved_time = -1", "must be at least 0"),
        ("disk_space_warning_level_ratio = nan", "must be a finite number"),
    ],
)
def test_out_of_bounds(tmp_path: Path, line: str, expected: str) -> None:
    path = write(tmp_path, line + "\n")
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value).startswith(f"{path}: {line.split(' = ')[0]} = ")
    assert expected in str(info.value)


def test_out_of_bounds_from_env() -> None:
    with pytest.raises(ConfigError, match=r"ROCKETQ_DISK_MAX_USED_SPACE_RATIO = \"99\".*10 and 95"):
        load(env={"ROCKETQ_DISK_MAX_USED_SPACE_RATIO": "99"})


def test_consume_queue_size_must_be_multiple_of_20(tmp_path: Path) -> None:
    path = write(tmp_path, "mapped_file_size_consume_queue = 6000010\n")
    with pytest.raises(ConfigError) as info:
        load(path)
    msg = str(info.value)
    assert "mapped_file_size_consume_queue = 6000010" in msg
    assert "must be a multiple of 20, e.g. 6000000" in msg
    with pytest.raises(ConfigError, match=r"mapped_file_size_consume_queue.*multiple of 20"):
        StoreConfig(mapped_file_size_consume_queue=30)


@pytest.mark.parametrize("value", ["24", "4;", "", "four", "01;-1", "1.5", "04,05"])
def test_bad_delete_when(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, f'delete_when = "{value}"\n')
    with pytest.raises(ConfigError) as info:
        load(path)
    msg = str(info.value)
    assert f'{path}: delete_when = "{value}"' in msg
    assert "0-23" in msg
    assert '"01;04;23"' in msg


@pytest.mark.parametrize(
    "value",
    [
        *["localhost:10911", "10.0.0.1", "10.0.0.1:", "10.0.0.1:0", "10.0.0.1:70000"],
        *["::1:10911", "10.0.0.256:10911", "10.0.0.1:port"],
    ],
)
def test_bad_store_host(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, f'store_host = "{value}"\n')
    with pytest.raises(ConfigError) as info:
        load(path)
    assert f'{path}: store_host = "{value}"' in str(info.value)
    assert "a.b.c.d:port" in str(info.value)


def test_good_store_host() -> None:
    assert StoreConfig(store_host="10.1.2.3:65535").store_host == "10.1.2.3:65535"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError, match=r"absent\.toml: config file not found; check the path"):
        load(path)


def test_unreadable_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read config file"):
        load(tmp_path)


def test_toml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "max_message_size = 5\nflush_disk_type = \n")
    with pytest.raises(ConfigError) as info:
        load(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: invalid TOML: ")
    assert "line 2, column" in msg
    assert "fix the syntax" in msg


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigError, match=r"^StoreConfig: flush_disk_type = \"SYNC\""):
        StoreConfig(flush_disk_type="SYNC")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^StoreConfig: max_message_size = true"):
        StoreConfig(max_message_size=True)


# --- generic loader on other dataclasses ------------------------------------------------


@dataclass(frozen=True)
class _NeedsName:
    name: str
    level: Literal["low", "high"] = "low"
    weight: float = field(default=1.0, metadata={"max": 2})


def test_required_field_missing() -> None:
    with pytest.raises(ConfigError, match=r"_NeedsName: name is required; .*ROCKETQ_NAME.*--name"):
        load_config(_NeedsName, env={})
    cfg = load_config(_NeedsName, env={"ROCKETQ_NAME": "n"}, overrides={"level": "high"})
    assert cfg == _NeedsName("n", "high")


def test_only_max_bound() -> None:
    with pytest.raises(ConfigError, match=r"flag --weight = 3: must be at most 2$"):
        load_config(_NeedsName, env={}, overrides={"name": "n", "weight": 3})


def test_validate_config_on_plain_dataclass() -> None:
    validate_config(_NeedsName("n"))
    with pytest.raises(
        ConfigError, match=r"^_NeedsName: level = \"mid\": must be one of low, high"
    ):
        validate_config(_NeedsName("n", "mid"))  # type: ignore[arg-type]


def test_unsupported_field_type_is_a_programming_error() -> None:
    @dataclass(frozen=True)
    class Bad:
        items: list[int] = field(default_factory=list)

    with pytest.raises(TypeError, match="unsupported config type"):
        load_config(Bad, env={})


@dataclass(frozen=True)
class _Ports:
    port: int = field(default=100, metadata={"min": 0, "max": 65535})
    # Unset: port + 1.
    side_port: int | None = field(
        default=None, metadata={"min": 0, "max": 65535, "unset": "port + 1"}
    )

    def __post_init__(self) -> None:
        validate_config(self)


def test_an_optional_field_is_unset_unless_given(tmp_path: Path) -> None:
    assert load_config(_Ports, env={}).side_port is None
    assert load_config(_Ports, write(tmp_path, "side_port = 7\n"), env={}).side_port == 7
    assert load_config(_Ports, env={"ROCKETQ_SIDE_PORT": "8"}).side_port == 8
    assert load_config(_Ports, env={}, overrides={"side-port": "0"}).side_port == 0
    with pytest.raises(ConfigError) as info:
        load_config(_Ports, env={}, overrides={"side_port": "x"})
    assert str(info.value) == (
        'flag --side-port = "x": must be an integer (unset by default: port + 1)'
    )
    with pytest.raises(ConfigError, match=r"side_port = 70000: must be between 0 and 65535"):
        _Ports(side_port=70000)


def test_dump_toml_leaves_an_unset_field_out(tmp_path: Path) -> None:
    assert dump_toml(_Ports()) == "port = 100\n"
    cfg = _Ports(side_port=5)
    assert load_config(_Ports, write(tmp_path, dump_toml(cfg)), env={}) == cfg


def test_only_a_plain_type_or_none_defaulting_to_none_is_optional() -> None:
    @dataclass(frozen=True)
    class BadDefault:
        port: int | None = 5

    @dataclass(frozen=True)
    class BadLiteral:
        mode: Literal["a", "b"] | None = None

    for cls in (BadDefault, BadLiteral):
        with pytest.raises(TypeError, match="unsupported config type"):
            load_config(cls, env={})


# --- printing the effective config ------------------------------------------------------


def test_config_to_dict() -> None:
    d = config_to_dict(StoreConfig())
    assert d["flush_disk_type"] == "ASYNC_FLUSH"
    assert d["disk_space_warning_level_ratio"] == 0.90
    keys = list(d)
    assert (keys[0], keys[-1]) == ("store_path_root_dir", "store_host")


def test_dump_toml_round_trips(tmp_path: Path) -> None:
    cfg = StoreConfig(
        store_path_root_dir='C:\\store "quoted"\n',
        flush_disk_type="SYNC_FLUSH",
        message_index_enable=False,
        disk_space_clean_forcibly_ratio=0.5,
        delete_when="01;04;23",
    )
    text = dump_toml(cfg)
    assert 'flush_disk_type = "SYNC_FLUSH"\n' in text
    assert "message_index_enable = false\n" in text
    assert load(write(tmp_path, text)) == cfg


def test_dump_toml_with_section_round_trips(tmp_path: Path) -> None:
    cfg = StoreConfig(max_message_size=77)
    text = dump_toml(cfg, section="store")
    assert text.startswith("[store]\nstore_path_root_dir = ")
    assert load(write(tmp_path, text), section="store") == cfg
