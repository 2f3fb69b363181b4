"""Prometheus text parsing: labels sorted, comments ignored, garbage never raises."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from verifier.capture.prometheus import family_total, parse_metrics, sample_key

EXPOSITION = """\
# HELP mlxcel_prompt_cache_hits_total Prompt cache hits
# TYPE mlxcel_prompt_cache_hits_total counter
mlxcel_prompt_cache_hits_total 2
mlxcel_paged_decode_launches_total{path="gather"} 9772
mlxcel_paged_decode_launches_total{path="fused_v2",kind="x"} 0
llamacpp:prompt_tokens_cached_total 132 1700000000000
weird{b="2",a="1"} 1.5e3
"""


def test_samples_and_sorted_label_keys() -> None:
    samples = parse_metrics(EXPOSITION)
    assert samples == {
        "mlxcel_prompt_cache_hits_total": 2.0,
        'mlxcel_paged_decode_launches_total{path="gather"}': 9772.0,
        'mlxcel_paged_decode_launches_total{kind="x",path="fused_v2"}': 0.0,
        "llamacpp:prompt_tokens_cached_total": 132.0,
        'weird{a="1",b="2"}': 1500.0,
    }


def test_escapes_in_label_values_round_trip() -> None:
    samples = parse_metrics('m{p="a\\"b\\\\c\\nd"} 1\n')
    assert samples == {sample_key("m", {"p": 'a"b\\c\nd'}): 1.0}
    assert list(samples) == ['m{p="a\\"b\\\\c\\nd"}']


def test_blanks_between_tokens_are_read_as_prometheus_reads_them() -> None:
    # The format allows blanks and tabs between any two tokens of a line: these are the
    # samples `spaced{a="1",b="2"}`, `{a="3",b="4"}` and `{a="5",b="6"}`, and a counter
    # written so is a counter, not a line to skip.
    text = 'spaced {a="1",b="2"} 1\nspaced { a = "3" , b="4" , } 2\nspaced\t{\ta=\t"5",b="6"\t} 3\n'
    assert parse_metrics(text) == {
        'spaced{a="1",b="2"}': 1.0,
        'spaced{a="3",b="4"}': 2.0,
        'spaced{a="5",b="6"}': 3.0,
    }


def test_garbage_lines_are_skipped() -> None:
    text = "\n".join(
        [
            "ok 1",
            "no_value",
            "bad{label 1",
            'unterminated{a="x 1',
            "value_not_a_number abc",
            "nan_value NaN",
            "inf_value +Inf",
            'glued{a="b"}1',
            "-starts_badly 1",
            "\x00\xff binary",
            "  # indented comment 1",
            "empty_labels{} 3",
        ]
    )
    assert parse_metrics(text) == {"ok": 1.0, "empty_labels": 3.0}


def test_family_total_sums_every_label_set_and_says_absent() -> None:
    samples = parse_metrics(EXPOSITION)
    assert family_total(samples, "mlxcel_paged_decode_launches_total") == 9772.0
    assert family_total(samples, "mlxcel_paged_decode") is None
    assert family_total(samples, "absent_total") is None


@given(st.text())
def test_any_text_parses_without_raising(text: str) -> None:
    for key, value in parse_metrics(text).items():
        assert isinstance(key, str) and isinstance(value, float)
