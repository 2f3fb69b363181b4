"""What the verify audit of helper-132 found: one configuration declared as two
conditions in two spellings the server reads as one, each verified with a split "in 1 of 2
conditions" between conditions that differ by nothing:

- a setting and the option it sets (llama-server's LLAMA_ARG_FLASH_ATTN=on and `-fa on`,
  mlxcel's MLXCEL_PREFILL_CHUNK=512 and `--prefill-chunk-size 512`);
- an option given once and twice with one value (`-fa on` and `-fa on -fa on`).

Each is one configuration run twice, an error (as `_run_twice` in
test_soundness_audit77.py is)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_soundness import SEED_FILES, _archive_files
from test_soundness_signals import _edited, _invalid

from verifier import layout

_FLIP = "llama-cpp-cuda-flip.tar.gz"


def _declared(condition: Any, settings: dict[str, str], args: list[str], drop: str) -> None:
    condition["settings"] = settings
    condition["server_args"] = args
    condition.pop("label", None)
    for server in condition["servers"]:
        server["environment"].pop(drop, None)
        server["environment"].update(settings)
        server["argv"] = [*server["argv"], *args]


def test_a_setting_and_the_option_it_sets_are_one_configuration(tmp_path: Path) -> None:
    def declared(experiment: Any) -> None:
        (off,) = [c for c in experiment["conditions"] if c["id"] == "fa-off"]
        _declared(off, {}, ["-fa", "on"], "LLAMA_ARG_FLASH_ATTN")

    files = _edited(_archive_files(_FLIP), layout.EXPERIMENT, declared)
    _invalid(files, tmp_path, "consistency", "declare the same configuration")


def test_an_option_given_twice_with_one_value_is_given_once(tmp_path: Path) -> None:
    def declared(experiment: Any) -> None:
        for condition, args in zip(
            experiment["conditions"],
            (["-fa", "on"], ["--flash-attn", "on", "-fa", "on"]),
            strict=True,
        ):
            _declared(condition, {}, args, "LLAMA_ARG_FLASH_ATTN")

    files = _edited(_archive_files(_FLIP), layout.EXPERIMENT, declared)
    _invalid(files, tmp_path, "consistency", "declare the same configuration")


def test_mlxcels_setting_and_the_option_it_sets_are_one_configuration(tmp_path: Path) -> None:
    def declared(experiment: Any) -> None:
        first, second = experiment["conditions"]
        _declared(first, {"MLXCEL_PREFILL_CHUNK": "512"}, [], "MLXCEL_SDPA_DETERMINISTIC")
        first["label"] = "MLXCEL_PREFILL_CHUNK=512"
        _declared(second, {}, ["--prefill-chunk-size", "512"], "MLXCEL_SDPA_DETERMINISTIC")

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, declared)
    _invalid(files, tmp_path, "consistency", "declare the same configuration")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # an option that takes each of its values in turn, and a setting of another value
        ((["-ot", "a", "-ot", "b"], {}), (["-ot", "b"], {})),
        (([], {"LLAMA_ARG_FLASH_ATTN": "on"}), (["-fa", "off"], {})),
        (([], {"LLAMA_ARG_FLASH_ATTN": "on"}), ([], {"LLAMA_ARG_FLASH_ATTN": "off"})),
    ],
)
def test_configurations_that_differ_stay_apart(
    first: tuple[list[str], dict[str, str]], second: tuple[list[str], dict[str, str]]
) -> None:
    from verifier.checks.consistency import _configuration
    from verifier.profiles import PROFILES
    from verifier.records import Condition

    def condition(args: list[str], settings: dict[str, str]) -> Condition:
        return Condition("c", "", None, settings, (), tuple(args))

    llama = PROFILES["llama.cpp"]
    assert _configuration(condition(*first), llama) != _configuration(condition(*second), llama)
    assert _configuration(condition(["-fa", "1"], {}), llama) == _configuration(
        condition([], {"LLAMA_ARG_FLASH_ATTN": "on"}), llama
    )
