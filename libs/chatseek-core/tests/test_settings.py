"""Settings come from the environment once, with errors that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatseek_core.errors import InvalidArgument
from chatseek_core.settings import DEFAULT_PORTS, env_flag, load_settings


def test_home_puts_data_logs_and_run_files_under_one_directory(tmp_path: Path) -> None:
    s = load_settings(env={"CHATSEEK_HOME": str(tmp_path)})
    assert s.data_dir == tmp_path / "data"
    assert s.log_dir == tmp_path / "logs"
    assert s.run_dir == tmp_path / "run"
    assert s.db_path("ingest") == tmp_path / "data" / "ingest.db"


def test_data_dir_and_peer_addresses_can_be_overridden(tmp_path: Path) -> None:
    s = load_settings(
        "lexical",
        env={
            "CHATSEEK_HOME": str(tmp_path),
            "CHATSEEK_DATA_DIR": str(tmp_path / "vol"),
            "CHATSEEK_EMBED_ADDR": "embed:9000",
        },
    )
    assert s.data_dir == tmp_path / "vol"
    assert s.addr("embed") == "embed:9000"
    assert s.listen == f"127.0.0.1:{DEFAULT_PORTS['lexical']}"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CHATSEEK_GATEWAY_ADDR", "no-port"),
        ("CHATSEEK_LISTEN", "host:99999"),
        ("CHATSEEK_FAKE_MODELS", "maybe"),
        ("CHATSEEK_EMBED_BACKEND", "cloud"),
        ("CHATSEEK_POLL_INTERVAL_S", "soon"),
    ],
)
def test_a_malformed_variable_is_an_error_naming_it(name: str, value: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        load_settings(env={"CHATSEEK_HOME": "/tmp/x", name: value})
    assert info.value.metadata["variable"] == name


def test_env_flag_accepts_the_usual_spellings() -> None:
    assert env_flag("X", env={"X": "Yes"}) is True
    assert env_flag("X", env={"X": "off"}) is False
    assert env_flag("X", default=True, env={}) is True
