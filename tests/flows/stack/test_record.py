"""flows.stack.record: the services record ``$SHIFTFLOW_HOME/services.json``. Absent is None, a corrupt or
misshapen record is a ``ServiceError`` naming the file, and a write is atomic (a failed write keeps the old one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flows.stack.procs import ServiceError
from flows.stack.record import RECORD_NAME, read_record, write_record

RECORD = {"version": 1, "ports": {"prefect": 4200, "mlflow": 5000},
          "services": {"prefect-server": {"pid": 12, "pgid": 12, "start_time": 345, "cmd": ["prefect"]}}}


def test_the_record_is_services_json() -> None:
    assert RECORD_NAME == "services.json"  # the module docstring's $SHIFTFLOW_HOME/services.json


def test_no_record_is_none(tmp_path: Path) -> None:
    assert read_record(tmp_path / RECORD_NAME) is None


def test_a_written_record_reads_back_and_its_folder_is_made(tmp_path: Path) -> None:
    path = tmp_path / "new-home" / RECORD_NAME
    write_record(path, RECORD)
    assert read_record(path) == RECORD
    write_record(path, RECORD | {"services": {}})  # replaced, not appended
    assert read_record(path) == RECORD | {"services": {}}
    assert os.listdir(path.parent) == [RECORD_NAME]  # no temporary file left


def test_a_failed_write_keeps_the_previous_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / RECORD_NAME
    write_record(path, RECORD)

    def crash(src: object, dst: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        write_record(path, {"version": 1, "services": {}})
    assert read_record(path) == RECORD


@pytest.mark.parametrize(("content", "words"), [
    (b"{not json", "is not valid JSON"),
    (b"\xff\xfe\x00garbage", "is not valid JSON"),  # not even text
    (b"[1, 2]", "has no 'services' mapping"),
    (b'{"version": 1, "services": ["prefect-server"]}', "has no 'services' mapping"),
])
def test_a_corrupt_record_is_an_error_naming_the_file(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / RECORD_NAME
    path.write_bytes(content)
    with pytest.raises(ServiceError) as err:
        read_record(path)
    assert str(err.value).startswith(f"{path} ") and words in str(err.value)
    assert "stop" in str(err.value)  # and says what to do with the processes it lists
