"""Wording shared by the human-readable formats, so text and Markdown say the same thing."""

from __future__ import annotations

import hashlib
import re
from typing import Any, NamedTuple

from verifier.model import Arm

# The arm names of EVIDENCE.md, in protocol order: every format uses these and no others.
ARMS: tuple[str, ...] = tuple(str(arm) for arm in Arm)

# Line breaks, tabs, other C0/C1 controls, zero-width and bidirectional controls, line and
# paragraph separators, the byte-order mark.
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
# Checks shown one per line even when they pass: they say what the verdict rests on.
ALWAYS_SHOWN = ("signature", "model files", "capture mode", "profile")
MAX_FINDINGS = 20  # findings listed in text and Markdown (the JSON report has them all)
NAME_WIDTH = 13  # the text report's first column of its grids
# How every format marks a condition's settings that no recorded command line or
# environment confirms (an attached capture's): the bundle's word, not a checked fact.
DECLARED = "declared, not verified"
# How every format introduces a note of the tool's that qualifies the verdict.
CAVEAT = "caveat"

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT.get(char) or f"\\u{ord(char):04x}"


def printable(node: Any) -> Any:
    """The report with every control character of bundle text shown as an escape.

    Every string of the document may come from a hostile bundle: this is the one place where
    text and Markdown make it inert for a terminal (ANSI/OSC sequences), for the layout (a
    newline could print a fake verdict line or end a table row) and for the eye (bidirectional
    overrides, zero-width characters). The JSON format keeps the exact strings.

    A string longer than MAX_SHOWN characters keeps its first and last MAX_SHOWN / 2 and
    says how many were cut between them, so that a sentence of this tool's that holds a
    long bundle string keeps its own words at either end (a key also gets the digest of
    it, so that two keys cut alike stay two). No report line needs more, and laying out
    one of millions of characters cost rich's wrapping time quadratic in its length (a
    4-million-character label: 64 s, 474 MiB).
    """
    if isinstance(node, str):
        return _CONTROL.sub(_escape, _shown(node))
    if isinstance(node, dict):
        return {_printable_key(k): printable(v) for k, v in node.items()}
    if isinstance(node, list):
        return [printable(v) for v in node]
    return node


MAX_SHOWN = 2000  # characters of one bundle string in text and Markdown


def _printable_key(key: Any) -> Any:
    return _CONTROL.sub(_escape, _shown(key, key=True)) if isinstance(key, str) else key


def _shown(text: Any, *, key: bool = False) -> Any:
    if not isinstance(text, str) or len(text) <= MAX_SHOWN:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() if key else None
    return cut(text, MAX_SHOWN, digest)


def cut(text: str, most: int, digest: str | None = None) -> str:
    """`text` if it has at most `most` characters; else its first and last `most` / 2 and,
    between them, how many were cut (and `digest`, if given)."""
    if len(text) <= most:
        return text
    half = most // 2
    said = f"{len(text) - 2 * half:,} characters cut"
    if digest is not None:
        said += f", sha256 {digest}"
    return f"{text[:half]} … ({said}; the JSON report has them) … {text[len(text) - half :]}"


def arm_cell(counts: dict[str, int]) -> str:
    """`6 A` or `5 A + 1 C`; an em dash for an empty arm."""
    if not counts:
        return "—"
    return " + ".join(f"{n} {label}" for label, n in sorted(counts.items()))


def number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.3f}"


def deltas_text(deltas: list[float]) -> str:
    return " / ".join(("+" if v > 0 else "") + number(v) for v in deltas)


def counter_name(ref: str) -> str:
    """`metric:x_total` reads as `x_total`; `stats:hits` as `stats.hits`."""
    source, _, name = ref.partition(":")
    if source == "stats":
        return "stats." + name
    return name if source == "metric" else ref


class TelemetryRow(NamedTuple):
    """What the telemetry said around the requests of one output class and arm."""

    label: str
    arm: str
    requests: int
    cached: str
    counters: tuple[tuple[str, str], ...]  # (counter, deltas), or empty when none moved
    recorded: bool  # the records carry counters at all


def class_telemetry_rows(condition: dict[str, Any]) -> list[TelemetryRow]:
    rows = []
    for entry in condition["class_telemetry"]:
        cached = ", ".join("absent" if v is None else str(v) for v in entry["cached_tokens"])
        # Labelled samples (decode paths) are shown even at zero: "fused_v2 0" is a fact.
        moving = tuple(
            (counter_name(k), deltas_text(v))
            for k, v in entry["counter_deltas"].items()
            if any(x != 0 for x in v) or "{" in k
        )
        rows.append(
            TelemetryRow(
                entry["class"], entry["arm"], entry["requests"], cached, moving,
                bool(entry["counter_deltas"]),
            )
        )  # fmt: skip
    return rows


def caveats(bundle: dict[str, Any]) -> list[str]:
    """The tool's caveats on a verified bundle's verdict, each a line of every format's
    headline (the JSON report has them as classification.caveats)."""
    classification = bundle["classification"]
    if classification is None or not bundle["verified"]:
        return []
    return list(classification["caveats"])


def condition_names(condition: dict[str, Any]) -> tuple[list[str], bool]:
    """A condition's label and its settings (once where they read alike), and whether they
    are only declared: no server was checked to run with them (an attached capture's), so
    every format marks them DECLARED, in its own words, never inside the bundle's text."""
    settings = ", ".join(f"{k}={v}" for k, v in condition["settings"].items())
    names = list(dict.fromkeys(x for x in (condition["label"], settings) if x))
    return names, bool(names) and not condition["settings_verified"]


def experiment_lines(experiment: dict[str, Any] | None) -> list[tuple[str, str]]:
    if experiment is None:
        return []
    server = experiment["server"]
    model = experiment["model"]
    protocol = experiment["protocol"]
    commit = (server.get("build_commit") or "unknown")[:12]
    lines = [
        ("server", f"{server['name']} ({server['profile']} profile), build {commit}"),
        ("binary sha256", server.get("binary_sha256") or "not recorded"),
        ("model", model.get("repo_id") or "unknown repository"),
        ("revision", model.get("revision") or "unpinned"),
        # One file of the model, named: the manifest lists (and --model-dir rehashes) all.
        ("model file", model.get("model_file") or "not named"),
        ("file sha256", model["model_sha256"]),
        ("config file", model.get("config_file") or "none"),
        ("config sha256", model.get("config_sha256") or "none"),
        (
            "protocol",
            f"{protocol['cycles']} cycles, max_tokens {protocol['max_tokens']}, "
            f"parallelism {protocol.get('parallelism') or 'not recorded'}, "
            f"block size {protocol.get('block_size') or 'not recorded'}",
        ),
    ]
    hardware = ", ".join(f"{k} {v}" for k, v in experiment["hardware"].items() if v)
    if hardware:
        lines.append(("hardware", hardware))
    gpu = [
        f"{_library_stem(lib['name'])} {lib.get('version') or 'version not recorded'}"
        for lib in experiment.get("runtime_libraries", [])
        if isinstance(lib, dict) and _GPU_LIBRARY.match(str(lib.get("name", "")))
    ]
    if gpu:
        lines.append(("GPU runtime", ", ".join(gpu)))
    return lines


# The accelerator libraries a server had loaded: driver, runtime, BLAS, DNN, collectives.
_GPU_LIBRARY = re.compile(
    r"^lib(?:cuda|cudart|cublas|cublasLt|cudnn\w*|nccl|nvrtc|nvJitLink|cufft|curand|cusparse"
    r"|amdhip64|hipblas\w*|rocblas|MIOpen|rccl|ze_loader|sycl)\.(?:so|dylib|dll)",
)


def divergence_sides(diagnosis: dict[str, Any], quote: Any = repr) -> list[str]:
    """Each side at the first divergent token: its choice, both tokens' logprobs, its gap."""
    sides = []
    for arm, other in (("cold", "warm"), ("warm", "cold")):
        side, theirs = diagnosis.get(arm), diagnosis.get(other)
        if side is None or theirs is None:
            continue
        if side["other_token_logprob"] is not None:
            other_lp = f"{side['other_token_logprob']:.6f}"
        elif side["other_token_logprob_at_most"] is not None:
            other_lp = f"at most {side['other_token_logprob_at_most']:.6f} (not in the top-k)"
        else:
            other_lp = "not listed"
        gap = side["top1_top2_gap"]
        sides.append(
            f"{arm} chose {quote(side['token'])} (logprob {side['logprob']:.6f}; "
            f"{quote(theirs['token'])} {other_lp}; top-1/top-2 gap "
            f"{'unknown' if gap is None else f'{gap:.3g}'})"
        )
    return sides


def _library_stem(name: str) -> str:
    """`libcublas.so.13.1.0.3` -> `libcublas` (its version is shown beside it)."""
    return name.split(".so", 1)[0].split(".dylib", 1)[0]


def excerpt_sides(diff: dict[str, Any], room: int) -> tuple[str, str, str]:
    """The shared start and both differing rests of the excerpts, cut to `room` code points.

    The two excerpts share everything before the difference, so one mark under the first
    character after the shared start fits both lines.
    """
    left, right = _noted(diff["baseline_excerpt"])[0], _noted(diff["warm_excerpt"])[0]
    # Offsets are counted on the text as shown (escapes included), not as stored.
    offset = next(
        (i for i, (x, y) in enumerate(zip(left, right, strict=False)) if x != y),
        min(len(left), len(right)),
    )
    before = left[:offset]
    after = max(len(left), len(right)) - offset
    if len(before) + after > room:
        keep = min(len(before), max(room - after, room // 2))
        if keep < len(before):
            before = ("…" + before[len(before) - keep + 1 :]) if keep > 1 else ""
    limit = max(room - len(before), 2)

    def rest(text: str) -> str:
        tail = text[offset:]
        return tail if len(tail) <= limit else tail[: limit - 1] + "…"

    return before, rest(left), rest(right)


def difference_notes(diff: dict[str, Any], labels: tuple[str, str]) -> list[str]:
    """The notes first_difference put at the end of each excerpt, one line each: the code
    points at the difference (NFC against NFD, look-alikes, invisible characters), which
    tell apart two excerpts that look the same, and `[ends here]`. excerpt_sides leaves them
    out of the excerpts it cuts; a report shows them whole, on lines of their own."""
    found = (_noted(diff["baseline_excerpt"])[1], _noted(diff["warm_excerpt"])[1])
    return [f"{label}: {note.strip()}" for label, note in zip(labels, found, strict=True) if note]


_NOTE = re.compile(r" \[(?:at \d+: (?:U\+[0-9A-F]{4,6} ?)+|ends here)\]\Z")


def _noted(excerpt: str) -> tuple[str, str]:
    """An excerpt and the note first_difference put at its end ("" where it has none)."""
    note = _NOTE.search(excerpt)
    return (excerpt, "") if note is None else (excerpt[: note.start()], note.group())


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`1 error`, `2 errors`: counts in reports always agree with their noun."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def claimed(title: str, verified: bool) -> str:
    """A title of what an unverified bundle says, marked as its claim (as Markdown's are)."""
    return title if verified else title + ", as claimed (unverified)"
