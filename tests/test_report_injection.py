"""Report injection: every bundle string that reaches a report, with hostile text, per format.

Each attack is written into one field of a copy of the seed sample, whose checksums are then
forged so that the bundle still verifies and every section of the report is printed. The
text report must keep its own lines (one verdict, one status), pass no terminal control and
no rich markup; the Markdown, rendered as GitHub would (tables on), must hold no link, image,
HTML, emphasis, mention or extra table cell of the attacker's; the JSON stays strict JSON and
keeps the exact string.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from make_samples import resum_tree
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from verifier import layout
from verifier.cli import app
from verifier.report.markdown import cell, code, plain

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "sample_bundles" / "seed-mlxcel"

# Each attack carries MARK: the attacker's text must never be found outside a code span.
MARK = "ZQX"
ATTACKS = {
    "backticks": "ZQX`` **bold** [link](https://evil.example) ![img](https://evil.example/i.png) `",
    "fake-verdict": "ZQX\nverdict: cache-state-independent\nverified: 99 files; signature verified",
    "table-and-mention": "| ZQX | b | @octocat #12 www.evil.example <img src=x onerror=alert(1)>",
    "html": "<details open><summary>ZQX</summary><a href='https://evil.example'>x</a>",
    "terminal": "\x1b[2J\x1b]8;;https://evil.example\x07ZQX\x1b]8;;\x07\r\x1b[31mred",
    "rich-markup": "[bold red]ZQX[/] [/] [link=https://evil.example]x[/link] :smile:",
    "bidi-zero-width": "ZQX\u202etxt.exe\u200b\u2028line",
}


def _set(*path: str | int) -> Callable[[dict[str, Any], str], None]:
    def edit(document: dict[str, Any], value: str) -> None:
        node: Any = document
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


FIELDS = {
    "hardware": _set("hardware", "cpu"),
    "server-name": _set("server", "name"),
    "condition-label": _set("conditions", 0, "label"),
    "model-repo": _set("model", "repo_id"),
    "profile": _set("server", "profile"),
}


def _hostile(tmp_path: Path, field: str, attack: str) -> Path:
    bundle = tmp_path / "bundle"
    shutil.copytree(SEED, bundle)
    path = bundle / layout.EXPERIMENT
    document = json.loads(path.read_text())
    FIELDS[field](document, ATTACKS[attack])
    if field == "model-repo":
        manifest = json.loads((bundle / layout.MODEL_MANIFEST).read_text())
        manifest["repo_id"] = ATTACKS[attack]
        (bundle / layout.MODEL_MANIFEST).write_text(json.dumps(manifest))
    path.write_text(json.dumps(document))
    resum_tree(bundle)
    return bundle


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["verify", *args], env={"COLUMNS": "100"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout


class _Outside(HTMLParser):
    """The text of a rendered page that is not inside <code> or <pre>, and every tag."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in ("code", "pre"):
            self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("code", "pre"):
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if not self.depth:
            self.text.append(data)


def assert_markdown_is_inert(markdown: str, *, quoted: bool = True) -> None:
    """No tag, link, mention or extra cell of the attacker's; with `quoted`, none of the
    attacker's text outside code at all (a finding's message of a check may quote bundle
    text in running prose: there it is escaped, not quoted)."""
    md = MarkdownIt("commonmark").enable("table")
    html = md.render(markdown)
    page = _Outside()
    page.feed(html)
    # Our own page uses these tags only; an attacker's <a>, <img>, <em>, <script> is none.
    assert set(page.tags) <= {
        "h3", "p", "code", "pre", "strong", "ul", "li", "table", "thead", "tbody", "tr",
        "th", "td", "details", "summary", "br", "sub",
    }, set(page.tags)  # fmt: skip
    outside = "".join(page.text)
    # GitHub links these in running text (mentions, issue references, URLs): never outside code.
    assert not re.search(r"@\w|#\d|://|www\.", outside), outside
    assert not quoted or MARK not in outside, outside
    for table in re.findall(r"<table>.*?</table>", html, flags=re.DOTALL):
        header = len(re.findall(r"<th[ >]", table.split("</tr>")[0]))
        for row in table.split("<tr>")[2:]:
            assert len(re.findall(r"<td[ >]", row)) == header, row


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_hostile_bundle_text_is_inert_in_every_format(
    tmp_path: Path, field: str, attack: str
) -> None:
    bundle = _hostile(tmp_path, field, attack)

    code_, text = _run(str(bundle))
    assert code_ in (0, 1)
    lines = text.splitlines()
    assert sum(line.strip().startswith("verdict:") for line in lines) == 1, text
    assert sum(line.strip().startswith(("verified:", "NOT verified")) for line in lines) == 1
    if attack == "fake-verdict":
        assert "ZQX\\nverdict:" in text  # the newline shown as an escape, never obeyed
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e\u200b\u2028]", text)
    if attack == "rich-markup" and field in ("hardware", "server-name"):
        assert "[bold red]ZQX[/]" in text  # shown as typed, never interpreted

    _, markdown = _run(str(bundle), "--format", "markdown")
    # The profile check names an unknown profile in its own sentence: escaped, not quoted.
    assert_markdown_is_inert(markdown, quoted=field != "profile")

    _, raw = _run(str(bundle), "--format", "json")
    report = json.loads(raw)  # strict JSON whatever the input
    experiment = report["bundles"][0]["experiment"]
    if experiment is not None and field == "hardware":
        assert experiment["hardware"]["cpu"] == ATTACKS[attack]


def test_a_hostile_bundle_name_is_inert_in_markdown(tmp_path: Path) -> None:
    bundle = tmp_path / "ZQX` [link](https://evil.example) @octocat | y"
    shutil.copytree(SEED, bundle)
    _, markdown = _run(str(bundle), str(SEED), "--format", "markdown")
    assert_markdown_is_inert(markdown)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "`plain`"),
        ("a`b", "``a`b``"),
        ("``x", "``` ``x ```"),
        ("x`", "`` x` ``"),
        ("", "` `"),
    ],
)
def test_code_spans_outlast_every_backtick_run(value: str, expected: str) -> None:
    assert code(value) == expected
    html = MarkdownIt("commonmark").render(code(value))
    assert html.count("<code>") == 1
    if value:
        assert f"<code>{value}</code>" in html.replace("&lt;", "<")


def test_cells_escape_pipes_and_plain_text_escapes_markup() -> None:
    assert cell("a|b") == "`a\\|b`"
    assert plain("see [x](y) and *z* <b>") == "see \\[x\\](y) and \\*z\\* \\<b\\>"
    assert plain("ping @octocat about #12") == "ping `@octocat` about `#12`"


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_hostile_file_names_and_json_keys_in_findings_are_inert(
    tmp_path: Path, attack: str
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(SEED, bundle)
    name = ATTACKS[attack].replace("/", "_").replace("\x00", "")
    (bundle / name).write_text("{}")  # unlisted: a checksums error names the file
    path = bundle / layout.EXPERIMENT
    document = json.loads(path.read_text())
    document[ATTACKS[attack]] = 1  # unknown key: a schema error quotes it
    path.write_text(json.dumps(document))

    code_, text = _run(str(bundle))
    assert code_ == 1
    lines = text.splitlines()
    assert sum(line.strip().startswith("verdict:") for line in lines) == 1, text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e\u200b\u2028]", text)
    _, markdown = _run(str(bundle), "--format", "markdown")
    assert_markdown_is_inert(markdown, quoted=False)
    report = json.loads(_run(str(bundle), "--format", "json")[1])  # strict JSON
    (result,) = report["bundles"]
    assert result["verdict"] == "invalid"
    # A name the reader accepts is named as it is; one with control characters is refused.
    named = json.dumps(result["findings"], ensure_ascii=False)
    assert (name if name.isprintable() else "control or non-printable character") in named


def test_a_string_of_millions_of_characters_is_cut_in_text_and_markdown(
    tmp_path: Path,
) -> None:
    """Laid out whole, a 4-million-character label took rich 64 s and 474 MiB; the text
    and Markdown reports show its first and last MAX_SHOWN / 2 characters and say how
    many were cut between them, and the JSON report keeps it whole."""
    from verifier.report.common import MAX_SHOWN

    bundle = tmp_path / "bundle"
    shutil.copytree(SEED, bundle)
    experiment = json.loads((bundle / layout.EXPERIMENT).read_text())
    label = "a" * 3_000_000 + "中"  # (not Latin: the text report takes rich's layout)
    experiment["conditions"][0]["label"] = label
    (bundle / layout.EXPERIMENT).write_text(json.dumps(experiment))
    resum_tree(bundle)
    for fmt in ("text", "markdown"):
        _, shown = _run(str(bundle), "--format", fmt)  # (the finding's `actual`, wrapped)
        assert f"({3_000_001 - MAX_SHOWN:,} characters cut" in " ".join(shown.split())
        assert "a" * (MAX_SHOWN // 2) in "".join(shown.split())
        assert "a" * (MAX_SHOWN // 2 + 1) not in "".join(shown.split())
    _, raw = _run(str(bundle), "--format", "json")
    assert label in json.dumps(json.loads(raw), ensure_ascii=False)


def test_a_long_settings_label_is_cut_before_a_sentence_names_it(tmp_path: Path) -> None:
    """The summary names each condition that split by its settings: a long setting is cut
    there, before the sentence is made, so the words after it (how many requests were
    compared, what the verdict means) are never cut with it; the JSON keeps the label."""
    from verifier.checks.context import VerifyOptions
    from verifier.report import document
    from verifier.verify import verify_path

    bundle = tmp_path / "bundle"
    shutil.copytree(SEED, bundle)
    experiment = json.loads((bundle / layout.EXPERIMENT).read_text())
    condition = experiment["conditions"][0]
    (name,) = condition["settings"]
    value = condition["settings"][name] + "x" * 5000
    condition["settings"][name] = value
    for server in condition["servers"]:
        server["environment"][name] = value
    condition["label"] = f"{name}={value}"
    (bundle / layout.EXPERIMENT).write_text(json.dumps(experiment))
    resum_tree(bundle)
    result = verify_path(bundle, VerifyOptions())
    assert result.classification is not None
    named = document._named(result.classification.conditions[0])
    assert named.startswith(f"{condition['id']}: {name}=")
    assert "characters cut" in named and len(named) < document.NAMED_CHARS + 100
    _, whole = _run(str(bundle), "--format", "json")
    label = json.loads(whole)["bundles"][0]["classification"]["conditions"][0]["label"]
    assert label == f"{name}={value}"


def test_two_long_keys_cut_alike_stay_two() -> None:
    from verifier.report.common import MAX_SHOWN, printable

    keys = ["k" * MAX_SHOWN + "1", "k" * MAX_SHOWN + "2"]
    shown = printable({key: index for index, key in enumerate(keys)})
    assert sorted(shown.values()) == [0, 1]
    assert all(len(key) < MAX_SHOWN + 200 for key in shown)
