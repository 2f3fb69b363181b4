"""A raw folder export cannot list, and a raw file name with control characters: a clear
error naming the folder (not `internal error: PermissionError ... This is a bug`), and the
name shown escaped, never sent to the terminal as it is (audit_i r5)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier import layout
from verifier.cli import app
from verifier.errors import ExportError
from verifier.raw import list_exchanges, load_raw

ENV = {"COLUMNS": "120"}


def export(raw: Path, out: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["export", str(raw), "--out", str(out)], env=ENV)
    assert isinstance(result.exception, SystemExit | None), result.exception
    return result.exit_code, result.stderr


def refuse(monkeypatch: pytest.MonkeyPatch, method: str, refused: Callable[[Path], bool]) -> None:
    """Path.`method` raises PermissionError on the folders `refused` picks, as the OS does
    for mode 000 without CAP_DAC_OVERRIDE (the tests may run as root, which reads them)."""
    original = getattr(Path, method)

    def refusing(self: Path, *args: object, **kwargs: object) -> object:
        if refused(self):
            raise PermissionError(13, "Permission denied", str(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, method, refusing)


def conditions(raw: Path) -> list[Path]:
    return sorted((raw / layout.RAW_CONDITIONS_DIR).iterdir())


@pytest.mark.parametrize("folder", ["exchanges", "servers"])
def test_an_unlistable_folder_of_a_condition_is_an_error(
    folder: str, factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    condition = conditions(factory_raw)[0]
    refuse(monkeypatch, "iterdir", lambda p: p == condition / folder)
    where = f"{layout.RAW_CONDITIONS_DIR}/{condition.name}/{folder}"
    with pytest.raises(ExportError, match=f"^{where}: cannot list: Permission denied$"):
        load_raw(factory_raw)
    with pytest.raises(ExportError, match=f"^{where}: cannot list"):
        list_exchanges(factory_raw)
    code, stderr = export(factory_raw, tmp_path / "public")
    assert code == 1
    assert f"{where}: cannot list: Permission denied" in stderr
    assert "internal error" not in stderr and "This is a bug" not in stderr
    assert not (tmp_path / "public").exists()


def test_an_unlistable_conditions_folder_is_an_error(
    factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conditions/ itself mode 000: listing it fails, and so does every stat below it
    (`is_dir` raises for EACCES, it does not answer False)."""
    top = factory_raw / layout.RAW_CONDITIONS_DIR
    refuse(monkeypatch, "iterdir", lambda p: p == top)
    refuse(monkeypatch, "is_dir", lambda p: p.is_relative_to(top) and p != top)
    code, stderr = export(factory_raw, tmp_path / "public")
    assert code == 1
    assert f"{layout.RAW_CONDITIONS_DIR}: cannot list: Permission denied" in stderr
    assert "internal error" not in stderr


def test_a_folder_below_an_unreadable_one_is_an_error(
    factory_raw: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    condition = conditions(factory_raw)[0]
    refuse(monkeypatch, "is_dir", lambda p: p == condition / "exchanges")
    with pytest.raises(ExportError, match=r"/exchanges: cannot list: Permission denied"):
        list_exchanges(factory_raw)


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists a mode-000 folder anyway")
def test_a_mode_000_exchanges_folder_is_an_error(factory_raw: Path, tmp_path: Path) -> None:
    exchanges = conditions(factory_raw)[0] / "exchanges"
    exchanges.chmod(0)
    try:
        code, stderr = export(factory_raw, tmp_path / "public")
    finally:
        exchanges.chmod(0o755)
    assert code == 1 and "cannot list: Permission denied" in stderr


HOSTILE_NAME = "\x1b]0;pwned\x07.json"


@pytest.fixture
def hostile_file(factory_raw: Path) -> Iterator[Path]:
    path = conditions(factory_raw)[0] / "exchanges" / HOSTILE_NAME
    path.write_bytes(b"{}")
    yield path


def test_a_file_name_with_control_characters_is_shown_escaped(
    hostile_file: Path, factory_raw: Path, tmp_path: Path
) -> None:
    code, stderr = export(factory_raw, tmp_path / "public")
    assert code == 1
    assert "\x1b" not in stderr and "\x07" not in stderr
    assert "exchanges/\\x1b]0;pwned\\x07.json: unexpected file in the raw directory" in stderr
    with pytest.raises(ExportError) as caught:
        load_raw(factory_raw)
    assert "\x1b" not in caught.value.message and "\\x1b]0;pwned\\x07.json" in caught.value.message


def test_a_condition_folder_name_with_control_characters_is_shown_escaped(
    factory_raw: Path,
) -> None:
    (factory_raw / layout.RAW_CONDITIONS_DIR / "c\x1b[2Jx").mkdir()
    with pytest.raises(ExportError) as caught:
        load_raw(factory_raw)
    message = caught.value.message
    assert "\x1b" not in message
    assert f"{layout.RAW_CONDITIONS_DIR}/c\\x1b[2Jx: not a condition of run.json" in message
