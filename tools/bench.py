"""Benchmarks: every heavy path of evidence against its floor and the tool people use today.

`make bench` (or `python tools/bench.py`) generates its inputs under a temporary folder
(a model folder of several files, one large file, a bundle of --records request records,
a raw capture with 100 MB of server logs), then runs each case, its floor and its peer
tool interleaved, --repeat times, each in its own process, and prints one Markdown table
of medians: wall seconds, the ratio to the floor, and peak RSS from the OS (wait4).
The README keeps the latest table with the machine it came from.

Floors are measured in the same run, so a busy machine slows both sides alike:
- hashing: OpenSSL itself (`openssl dgst -sha256`), one process per core for a folder;
- start-up: `python -c "import typer, rich"`;
- verify: a plain script that decompresses the same archive, `json.loads` and validates
  every document with the same jsonschema validators, and nothing else;
- export: records per second, and raw logs in MB/s (absolute targets of issue 10).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
sys.path.insert(0, str(TOOLS))

from seed_sample import write_seed_raw  # noqa: E402

PYTHON = sys.executable
CHECKOUT = [REPO]  # where `python -m verifier` runs: --repo measures another checkout
EVIDENCE = [PYTHON, "-m", "verifier"]
SEED = REPO / "sample_bundles" / "seed-mlxcel"
REQUESTS_PER_CONDITION = 14
RECORDS_HELP = "request records of the bundle and of the capture (at least this many)"
MiB = 1 << 20


# Commands run as a user's do: with their compiled modules (.pyc) written on first use and
# read after, even where this shell says PYTHONDONTWRITEBYTECODE (every start-up would
# otherwise recompile the tool's own modules: about 80 ms of a `verify`).
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_mib: float


def run_procs(
    commands: Sequence[Sequence[str]],
    stdout: int | None = subprocess.DEVNULL,
    ok: tuple[int, ...] = (0,),
) -> Run:
    """Start every command at once, wait for all: wall time, and the largest peak RSS."""
    # files, not pipes: a pipe could fill and block the command
    errs = [tempfile.TemporaryFile() for _ in commands]  # noqa: SIM115
    start = time.perf_counter()
    procs = [
        subprocess.Popen(list(c), cwd=CHECKOUT[0], stdout=stdout, stderr=err, env=_ENV)
        for c, err in zip(commands, errs, strict=True)
    ]
    peak_kib = 0
    for proc in procs:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        peak_kib = max(peak_kib, usage.ru_maxrss)
    elapsed = time.perf_counter() - start
    for proc, command, err in zip(procs, commands, errs, strict=True):
        err.seek(0)
        text = err.read().decode(errors="replace")
        err.close()
        if proc.returncode not in ok:
            raise SystemExit(f"bench: {' '.join(command)} exited {proc.returncode}:\n{text}")
    return Run(elapsed, peak_kib / 1024)


def tree_peak_mib(
    command: Sequence[str], every_s: float = 0.005, ok: tuple[int, ...] = (0,)
) -> float:
    """The largest memory a command and the processes it forks use together: their
    proportional set sizes (PSS: a page shared by n processes counts 1/n in each), summed
    and polled every `every_s` seconds. wait4's peak is one process's only."""
    proc = subprocess.Popen(
        list(command), cwd=CHECKOUT[0], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=_ENV,
    )  # fmt: skip
    peak_kib = 0
    while proc.poll() is None:
        total, pending = 0, [proc.pid]
        while pending:
            pid = pending.pop()
            try:
                for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                for task in Path(f"/proc/{pid}/task").iterdir():
                    pending += [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue  # it ended meanwhile
        peak_kib = max(peak_kib, total)
        time.sleep(every_s)
    if proc.returncode not in ok:
        raise SystemExit(f"bench: {' '.join(command)} exited {proc.returncode}")
    return peak_kib / 1024


def run_shell(script: str) -> Run:
    return run_procs([["bash", "-c", script]])


def run_inside(command: Sequence[str]) -> Run:
    """A Python command that prints its own seconds (interpreter start excluded)."""
    with tempfile.TemporaryFile() as out:
        outcome = run_procs([command], stdout=out.fileno())
        out.seek(0)
        seconds = float(out.read().decode().split()[-1])
    return Run(seconds, outcome.peak_mib)


@dataclass
class Case:
    """One measured command, run `repeat` times; medians of its runs."""

    name: str
    run: Callable[[], Run]
    before: Callable[[], None] | None = None
    runs: list[Run] | None = None

    @property
    def seconds(self) -> float:
        assert self.runs
        return statistics.median(r.seconds for r in self.runs)

    @property
    def peak_mib(self) -> float:
        assert self.runs
        return statistics.median(r.peak_mib for r in self.runs)


class PutAside:
    """Outputs of many files moved into one folder, not deleted, until the bench ends (with
    its temporary folder). ext4 passes over the inodes of files deleted in the last minutes
    when it allocates new ones (perf shows recently_deleted and find_get_block_common): with
    the last export's 10,000 files deleted just before it, writing the next one took 1.5 to
    4.6 s of system time instead of 0.2 s here, and so measured the file system's memory of
    the bench's own deletions, not export. (A bundle is exported into a new folder.)"""

    def __init__(self, scratch: Path) -> None:
        self.folder = scratch / "put-aside"
        self.count = 0

    def __call__(self, *paths: Path) -> None:
        self.folder.mkdir(exist_ok=True)
        for path in paths:
            if path.exists():
                self.count += 1
                path.rename(self.folder / f"{self.count}-{path.name}")


def measure(cases: Sequence[Case], repeat: int) -> None:
    """Interleave the cases (ours, floor, peer, ours, ...) so noise falls on all alike.

    One round first that is not counted: modules compiled, files in the page cache."""
    for case in cases:
        if case.before is not None:
            case.before()
        case.run()
        case.runs = []
    for _ in range(repeat):
        for case in cases:
            if case.before is not None:
                case.before()
            assert case.runs is not None
            case.runs.append(case.run())


# ---------------------------------------------------------------- inputs


def write_model(folder: Path, shards: int, shard_bytes: int) -> list[Path]:
    """A safetensors-shaped folder: `shards` weight files of random bytes and small JSONs."""
    folder.mkdir(parents=True)
    block = os.urandom(MiB)
    paths = []
    for index in range(1, shards + 1):
        path = folder / f"model-{index:05d}-of-{shards:05d}.safetensors"
        with path.open("wb") as handle:
            for offset in range(0, shard_bytes, MiB):
                # a different first byte per MiB keeps every block distinct
                handle.write(bytes([(offset // MiB + index) % 256]) + block[1:])
        paths.append(path)
    for name in ("config.json", "tokenizer.json", "generation_config.json"):
        (folder / name).write_text(json.dumps({"name": name, "pad": "x" * 5000}))
    return paths


def warm(paths: Sequence[Path]) -> None:
    """Read every file once, so each run sees the page cache (as a rehash usually does)."""
    for path in paths:
        with path.open("rb") as handle:
            while handle.read(8 * MiB):
                pass


def split_two(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Two lists of near-equal total size (largest first, to the lighter side)."""
    sides: tuple[list[Path], list[Path]] = ([], [])
    sizes = [0, 0]
    for path in sorted(paths, key=lambda p: -p.stat().st_size):
        side = 0 if sizes[0] <= sizes[1] else 1
        sides[side].append(path)
        sizes[side] += path.stat().st_size
    return sides


# The times a capture records, by where they are in its documents: each copy of the
# conditions runs after the one before it (one request and one server at a time).
_TIMES = ("started_at", "ready_at", "stopped_at")


def _later(document: Any, seconds: float) -> None:
    """Every time of a record, an exchange or a server (`_TIMES`, and an exchange's
    timing) moved `seconds` later."""
    for holder in (document, document.get("timing") or {}):
        for name in _TIMES:
            value = holder.get(name)
            if isinstance(value, str):
                when = datetime.fromisoformat(value) + timedelta(seconds=seconds)
                holder[name] = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _span(times: list[str]) -> float:
    """Seconds from the first of these times to the last, and one more."""
    parsed = [datetime.fromisoformat(t) for t in times]
    return (max(parsed) - min(parsed)).total_seconds() + 1.0


# The setting each copy of a condition adds, with the copy's number: two conditions that
# declare the same configuration are an error (one configuration run twice), so each copy
# is one of its own, as a sweep's conditions are.
COPY_SETTING = "MLXCEL_BENCH_COPY"


def _copy_of(condition: dict[str, Any], new_id: str, n: int) -> dict[str, Any]:
    """The declaration of copy `n` of a condition: its own id, and COPY_SETTING=n."""
    settings = {**condition.get("settings", {}), COPY_SETTING: str(n)}
    label = ", ".join(f"{k}={v}" for k, v in settings.items())
    return {**condition, "id": new_id, "settings": settings, "label": label}


def scale_raw(raw: Path, copies: int) -> None:
    """Duplicate the two conditions of the seed raw capture `copies` times, each copy run
    after the one before it, each with a setting of its own (COPY_SETTING)."""
    run = json.loads((raw / "run.json").read_text())
    base = list(run["conditions"])
    span = _span(
        [
            t
            for path in (raw / "conditions").rglob("*.json")
            for doc in [json.loads(path.read_text())]
            for t in [*(doc.get(n) for n in _TIMES), (doc.get("timing") or {}).get("started_at")]
            if isinstance(t, str)
        ]
    )
    for n in range(1, copies):
        for condition in base:
            new_id = f"{condition['id']}-x{n}"
            shutil.copytree(raw / "conditions" / condition["id"], raw / "conditions" / new_id)
            for path in (raw / "conditions" / new_id).rglob("*.json"):
                doc = json.loads(path.read_text())
                doc["condition"] = new_id
                if isinstance(doc.get("env"), dict):  # a server's: it ran with the setting
                    doc["env"][COPY_SETTING] = str(n)
                _later(doc, n * span)
                response = doc.get("response") or {}
                body = response.get("body")
                if isinstance(body, dict) and isinstance(body.get("id"), str):
                    # one answer per record: each copy has its own response id
                    old_id, body["id"] = body["id"], f"{body['id']}-x{n}"
                    if isinstance(response.get("text"), str):
                        response["text"] = response["text"].replace(old_id, body["id"])
                if isinstance(body, dict) and response.get("text") is None:
                    _vary_choices(body.get("choices"), n)  # as a reply the body alone holds
                path.write_text(json.dumps(doc, indent=2))
            run["conditions"].append(_copy_of(condition, new_id, n))
    (raw / "run.json").write_text(json.dumps(run, indent=2))


# The seed capture's user and machine, and the names the non-ASCII export case gives them.
PERSON_PAST_ASCII = {"alice": "j\u00f6rg", "gb10-lab-07": "b\u00fcro-gpu-07"}


def rename_person(raw: Path, names: dict[str, str]) -> None:
    """Each of `names`' keys replaced by its value in every file of the raw capture (as if
    that person had captured it on that machine)."""
    for path in sorted(p for p in raw.rglob("*") if p.is_file()):
        text = path.read_text("utf-8")
        for old, new in names.items():
            text = text.replace(old, new)
        path.write_text(text, "utf-8")


def scale_public(public: Path, copies: int) -> None:
    """Duplicate the conditions of an exported bundle `copies` times; rewrite SHA256SUMS.

    What export would write for a capture `copies` times as long (less ledger entries for
    the copies), made in seconds, so verify can be measured on a large bundle.
    """
    from verifier.checksums import format_sums

    experiment = json.loads((public / "experiment.json").read_text())
    base = list(experiment["conditions"])
    span = _span(
        [
            t
            for condition in base
            for server in condition.get("servers", [])
            for t in (server.get("started_at"), server.get("stopped_at"))
            if isinstance(t, str)
        ]
        + [
            t
            for record in (public / "records").rglob("*.json")
            for t in [json.loads(record.read_text()).get("started_at")]
            if isinstance(t, str)
        ]
    )
    for n in range(1, copies):
        for condition in base:
            new_id = f"{condition['id']}-x{n}"
            target = public / "records" / new_id
            target.mkdir()
            for record in sorted((public / "records" / condition["id"]).glob("*.json")):
                doc = json.loads(record.read_text())
                doc["condition"] = new_id
                _later(doc, n * span)
                if isinstance(doc.get("response"), dict) and "id" in doc["response"]:
                    doc["response"]["id"] = f"{doc['response']['id']}-x{n}"  # one answer each
                _vary_reply(doc, n)
                (target / record.name).write_text(json.dumps(doc, indent=2) + "\n")
            servers = [dict(server) for server in condition.get("servers", [])]
            for server in servers:
                _later(server, n * span)
                server["environment"] = {**server["environment"], COPY_SETTING: str(n)}
            experiment["conditions"].append({**_copy_of(condition, new_id, n), "servers": servers})
    (public / "experiment.json").write_text(json.dumps(experiment, indent=2) + "\n")
    (public / "SHA256SUMS.sig").unlink(missing_ok=True)
    files = {
        p.relative_to(public).as_posix(): p.read_bytes()
        for p in public.rglob("*")
        if p.is_file() and p.name != "SHA256SUMS"
    }
    (public / "SHA256SUMS").write_bytes(format_sums(files))


def _vary_reply(record: dict[str, Any], copy: int) -> None:
    """Give each copy its own reply text (and output hash), alike in every record of it.

    Every record of a copy changes the same way, so its split stays what it was, while no
    reply text repeats from one copy to the next: a cache keyed by string cannot make a
    verify of this bundle (or an export of the raw capture, `scale_raw`) cheaper than one
    of a real sweep, whose requests of one condition repeat their replies, but not those of
    every other condition.
    """
    from verifier.canonical import output_hash

    response = record.get("response")
    choices = response.get("choices") if isinstance(response, dict) else None
    if record.get("output_hash") is not None and _vary_choices(choices, copy):
        record["output_hash"] = output_hash(response)


def _vary_choices(choices: object, copy: int) -> bool:
    """The copy number, spelled as words, after every seventh word of each choice's
    message; False (and nothing changed) where a choice holds token lists, which spell the
    reply."""
    if not isinstance(choices, list):
        return False
    messages = [c.get("message") if isinstance(c, dict) else None for c in choices]
    if not all(isinstance(m, dict) for m in messages):
        return False
    if any(c.get("logprobs") is not None for c in choices):
        return False
    tag = _spelled(copy)
    for message in messages:
        assert isinstance(message, dict)
        if isinstance(message.get("content"), str):
            words = message["content"].split(" ")
            message["content"] = " ".join(
                w + (f" {tag}" if i % 7 == 6 else "") for i, w in enumerate(words)
            )
    return True


_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _spelled(number: int) -> str:
    return "-".join(_DIGITS[int(d)] for d in str(number))


_LOG_LINES = (
    "[INFO] slot update_slots: id  0 | task {n} | prompt processing progress, n_past = {p}, "
    "n_tokens = 512, progress = 0.{p}\n"
    "[INFO] slot print_timing: id  0 | task {n} | prompt eval time = 41.52 ms / 512 tokens "
    "(0.08 ms per token, 12331.21 tokens per second)\n"
    "[DEBUG] cache: block {p} reused, {n} blocks resident, hit ratio 0.{p}\n"
)


def pad_logs(raw: Path, total_bytes: int) -> int:
    """Grow the raw capture's server logs to about `total_bytes` of realistic lines."""
    logs = sorted(raw.glob("conditions/*/servers/*.log"))
    per_log = total_bytes // len(logs)
    written = 0
    for index, log in enumerate(logs):
        chunk = "".join(_LOG_LINES.format(n=index * 1000 + i, p=i % 97) for i in range(2000))
        data = chunk.encode()
        with log.open("ab") as handle:
            for _ in range(per_log // len(data)):
                handle.write(data)
                written += len(data)
    return written


# Decompress, json.loads and validate every document of one archive with the validators
# verify uses (schemas.validate: the compiled fast path, jsonschema for what it refuses):
# the least any verify of this archive has to do.
_VERIFY_FLOOR = """
import json, sys, tarfile
from verifier import schemas
with tarfile.open(sys.argv[1], "r:gz") as archive:
    for member in archive:
        if member.isfile() and member.name.endswith(".json"):
            document = json.loads(archive.extractfile(member).read())
            errors = schemas.validate(document, schemas.KIND_TO_SCHEMA[document["kind"]])
            assert not errors, (member.name, errors[0].message)
"""

# The engine alone: what `evidence manifest` and `verify --model-dir` run once started.
_ENGINE = """
import sys, time
from pathlib import Path
from verifier.modelfiles import hash_model
start = time.perf_counter()
hash_model(Path(sys.argv[1]))
print(time.perf_counter() - start)
"""

_HASH_CEILING = """
import hashlib, time, sys
block = bytes(64 << 20)
digest = hashlib.sha256()
start = time.perf_counter()
for _ in range(int(sys.argv[1])):
    digest.update(block)
print(time.perf_counter() - start)
"""

# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Row:
    what: str
    ours: Case
    floor: Case | None  # the target is a ratio to it, or an absolute rate when None
    target: str
    met: bool
    ratio: str
    peer: Case | None = None
    peer_ratio: str = ""


def rate(nbytes: int, seconds: float) -> str:
    return f"{nbytes / seconds / 1e9:.2f} GB/s"


def fmt_case(case: Case | None) -> str:
    if case is None:
        return ""
    return f"{case.name}: {case.seconds:.3f} s"


def print_table(rows: Sequence[Row], header: str) -> None:
    print(header)
    print()
    print("| what | evidence (median) | floor (median) | ratio | target | met | peer (median) "
          "| vs peer | evidence peak MiB |")  # fmt: skip
    print("|---|---|---|---:|---|:-:|---|---:|---:|")
    for row in rows:
        print(
            f"| {row.what} | {fmt_case(row.ours)} | {fmt_case(row.floor)} | {row.ratio} "
            f"| {row.target} | {'yes' if row.met else '**no**'} | {fmt_case(row.peer)} "
            f"| {row.peer_ratio} | {row.ours.peak_mib:.0f} |"
        )


# ---------------------------------------------------------------- the cases


_ENGINE_TITLE = "the same, the engine once started"


def _hash_row(
    title: str, nbytes: int, ours: Case, floor: Case, peer: Case, target: str, peer_times: float = 0
) -> Row:
    """A hashing row: our rate as a share of OpenSSL's (at least 90%), and, where
    `peer_times` is given, at least that many times the peer's."""
    share, faster = floor.seconds / ours.seconds, peer.seconds / ours.seconds
    return Row(
        f"{title} ({rate(nbytes, ours.seconds)})", ours, floor, target,
        met=share >= 0.9 and faster >= peer_times,
        ratio=f"{share:.0%} of OpenSSL's rate", peer=peer, peer_ratio=f"{faster:.1f}x faster",
    )  # fmt: skip


def bench_hashing(scratch: Path, repeat: int, shards: int, shard_mib: int) -> list[Row]:
    folder = scratch / "model"
    shard_paths = write_model(folder, shards, shard_mib * MiB)
    every = sorted(p for p in folder.iterdir() if p.is_file())
    total = sum(p.stat().st_size for p in every)
    left, right = split_two(every)
    sums = scratch / "SHA256SUMS"
    sums.write_text(
        subprocess.run(
            ["sha256sum", *[p.name for p in every]], cwd=folder, capture_output=True, text=True,
            check=True,
        ).stdout
    )  # fmt: skip
    out = scratch / "manifest.json"

    def drop_out() -> None:
        out.unlink(missing_ok=True)

    warm(every)
    ours = Case(
        "evidence manifest",
        lambda: run_procs([[*EVIDENCE, "manifest", str(folder), "-o", str(out)]]),
        before=drop_out,
    )
    floor = Case(
        "openssl dgst x2 processes",
        lambda: run_procs(
            [["openssl", "dgst", "-sha256", *map(str, side)] for side in (left, right)]
        ),
    )
    peer = Case("sha256sum -c", lambda: run_shell(f"cd {folder} && sha256sum -c --quiet {sums}"))
    engine = Case("hash_model()", lambda: run_inside([PYTHON, "-c", _ENGINE, str(folder)]))
    measure([ours, engine, floor, peer], repeat)
    folder_target = ">= 90% of two-core OpenSSL; >= 5x sha256sum"
    folder_title = f"hash a model folder: {len(every)} files, {total / 2**30:.2f} GiB"
    folder_row = _hash_row(folder_title, total, ours, floor, peer, folder_target, peer_times=5)
    engine_row = _hash_row(_ENGINE_TITLE, total, engine, floor, peer, folder_target, peer_times=5)

    big = shard_paths[0]
    size = big.stat().st_size
    one_out = scratch / "one.json"

    def drop_one() -> None:
        one_out.unlink(missing_ok=True)

    warm([big])
    ours_one = Case(
        "evidence manifest",
        lambda: run_procs([[*EVIDENCE, "manifest", str(big), "-o", str(one_out)]]),
        before=drop_one,
    )
    floor_one = Case("openssl dgst", lambda: run_procs([["openssl", "dgst", "-sha256", str(big)]]))
    peer_one = Case("sha256sum", lambda: run_procs([["sha256sum", str(big)]]))
    blocks = max(1, size // (64 * MiB))
    engine_one = Case("hash_model()", lambda: run_inside([PYTHON, "-c", _ENGINE, str(big)]))
    ceiling = Case(
        "hashlib over RAM",
        lambda: run_inside([PYTHON, "-c", _HASH_CEILING, str(blocks)]),
    )
    measure([ours_one, engine_one, floor_one, peer_one, ceiling], repeat)
    one_target = ">= 90% of one core's OpenSSL"
    one_title = f"hash one file: {size / 2**30:.2f} GiB"
    one_row = _hash_row(one_title, size, ours_one, floor_one, peer_one, one_target)
    engine_one_row = _hash_row(_ENGINE_TITLE, size, engine_one, floor_one, peer_one, one_target)
    ram = blocks * 64 * MiB
    ceiling_row = Row(
        f"for reference: one core hashing RAM, no file ({rate(ram, ceiling.seconds)})",
        ceiling,
        floor_one,
        "",
        met=True,
        ratio=f"{(ram / ceiling.seconds) / (size / floor_one.seconds):.0%} of OpenSSL on a file",
    )
    shutil.rmtree(folder)
    return [folder_row, engine_row, one_row, engine_one_row, ceiling_row]


def bench_startup(repeat: int) -> list[Row]:
    floor = Case(
        'python -c "import typer, rich"', lambda: run_procs([[PYTHON, "-c", "import typer, rich"]])
    )
    bare = Case("python -c pass", lambda: run_procs([[PYTHON, "-c", "pass"]]))
    helps = Case("evidence --help", lambda: run_procs([[*EVIDENCE, "--help"]]))
    verify = Case(
        "evidence verify seed-mlxcel",
        lambda: run_procs([[*EVIDENCE, "verify", str(SEED)]], ok=(0, 1)),  # timed either way
    )
    tiny_help = Case(
        "a 2-command typer app --help", lambda: run_procs([[PYTHON, "-c", _TINY_TYPER, "--help"]])
    )
    tiny_run = Case(
        "its command, doing nothing", lambda: run_procs([[PYTHON, "-c", _TINY_TYPER, "a"]])
    )
    measure([floor, bare, helps, verify, tiny_help, tiny_run], repeat)
    return [
        Row(
            "`evidence --help`", helps, floor, "<= 1.5x",
            met=helps.seconds <= 1.5 * floor.seconds,
            ratio=f"{helps.seconds / floor.seconds:.2f}x",
            peer=tiny_help, peer_ratio=f"{helps.seconds / tiny_help.seconds:.2f}x",
        ),
        Row(
            "`evidence verify` of the seed-shaped sample", verify, floor, "<= 2x",
            met=verify.seconds <= 2 * floor.seconds,
            ratio=f"{verify.seconds / floor.seconds:.2f}x",
            peer=tiny_run, peer_ratio=f"{verify.seconds / tiny_run.seconds:.2f}x",
        ),
        Row(
            "the bare interpreter (for reference)", bare, floor, "", met=True,
            ratio=f"{bare.seconds / floor.seconds:.2f}x",
        ),
    ]  # fmt: skip


# The least a typer command line with rich help costs: the peer of the start-up rows.
_TINY_TYPER = """
import typer
app = typer.Typer(add_completion=False, rich_markup_mode="rich")
@app.command()
def a(x: int = 1) -> None:
    "Do a."
@app.command()
def b(x: int = 1) -> None:
    "Do b."
app()
"""


def bench_bundles(
    scratch: Path, repeat: int, export_repeat: int, records: int, log_mb: int
) -> list[Row]:
    copies = max(1, -(-records // (2 * REQUESTS_PER_CONDITION)))  # rounded up
    count = copies * 2 * REQUESTS_PER_CONDITION

    # verify: the seed capture exported once, then scaled to `count` records
    seed_raw, public, archive = scratch / "seed-raw", scratch / "public", scratch / "public.tar.gz"
    write_seed_raw(seed_raw)
    run_procs([[*EVIDENCE, "export", str(seed_raw), "--out", str(public)]])
    scale_public(public, copies)
    run_shell(f"cd {public} && tar --sort=name --owner=0 --group=0 -czf {archive} *")
    # The defaults stop at 10,000 members, 32 MiB and 1,000,000 JSON values in all.
    size = sum(p.stat().st_size for p in public.rglob("*") if p.is_file())
    limits = ["--max-members", str(4 * count + 1000), "--max-total-bytes", str(2 * size)]
    limits += ["--max-json-values", str(1000 * count + 100_000)]
    verify_tar = Case(
        "evidence verify .tar.gz",
        lambda: run_procs([[*EVIDENCE, "verify", str(archive), "-f", "json", *limits]]),
    )
    verify_dir = Case(
        "evidence verify dir",
        lambda: run_procs([[*EVIDENCE, "verify", str(public), "-f", "json", *limits]]),
    )
    floor = Case(
        "decompress+loads+validate",
        lambda: run_procs([[PYTHON, "-c", _VERIFY_FLOOR, str(archive)]]),
    )
    tar_peer = Case("tar -xzOf", lambda: run_shell(f"tar -xzOf {archive} > /dev/null"))
    gzip_peer = Case("gzip -dc", lambda: run_shell(f"gzip -dc {archive} > /dev/null"))
    sums_peer = Case(
        "sha256sum -c", lambda: run_shell(f"cd {public} && sha256sum -c --quiet SHA256SUMS")
    )
    measure([verify_tar, verify_dir, floor, tar_peer, gzip_peer, sums_peer], repeat)
    # verify forks a child for the leak scan of a bundle this large: both count
    together_mib = tree_peak_mib([*EVIDENCE, "verify", str(archive), "-f", "json", *limits])
    size_mb = sum(p.stat().st_size for p in public.rglob("*") if p.is_file()) / 1e6
    archive_mb = archive.stat().st_size / 1e6
    put_aside = PutAside(scratch)
    put_aside(public)

    # export: a raw capture of `count` records, then the seed's with `log_mb` of logs
    raw = scratch / "raw"
    write_seed_raw(raw)
    scale_raw(raw, copies)
    out, out_archive = scratch / "exported", scratch / "exported.tar.gz"

    def fresh_outputs() -> None:
        put_aside(out, out_archive)

    def export_of(capture: Path) -> Case:
        command = [*EVIDENCE, "export", str(capture), "--out", str(out), "--archive"]
        return Case(
            "evidence export --archive",
            lambda: run_procs([[*command, str(out_archive)]]),
            before=fresh_outputs,
        )

    export = export_of(raw)
    # the same capture by a person whose names are past ASCII: export looks for each name
    # in its other spellings and in any case (a capture of 1,400 records took 279 s so)
    named = scratch / "raw-named"
    write_seed_raw(named)
    rename_person(named, PERSON_PAST_ASCII)
    scale_raw(named, copies)
    export_named = export_of(named)
    logged = scratch / "raw-logs"
    write_seed_raw(logged)
    log_bytes = pad_logs(logged, log_mb * 10**6)
    export_logs = export_of(logged)
    measure([export, export_named, export_logs], export_repeat)
    fresh_outputs()
    records_per_s = count / export.seconds
    named_per_s = count / export_named.seconds
    user, host = PERSON_PAST_ASCII.values()
    log_rate = log_bytes / 1e6 / export_logs.seconds
    return [
        Row(
            f"verify a {count:,}-record bundle ({size_mb:.0f} MB, archive {archive_mb:.1f} MB), "
            ".tar.gz",
            verify_tar, floor, "<= 1.5x the floor; peak < 300 MB",
            met=verify_tar.seconds <= 1.5 * floor.seconds and together_mib * MiB < 300e6,
            ratio=f"{verify_tar.seconds / floor.seconds:.2f}x; peak {together_mib:.0f} MiB with "
            "its forked child (PSS)",
            peer=tar_peer, peer_ratio=f"gzip -dc {gzip_peer.seconds:.3f} s",
        ),
        Row(
            "the same bundle, as a directory", verify_dir, floor, "<= 1.5x the floor",
            met=verify_dir.seconds <= 1.5 * floor.seconds,
            ratio=f"{verify_dir.seconds / floor.seconds:.2f}x",
            peer=sums_peer, peer_ratio="",
        ),
        Row(
            f"export {count:,} records ({records_per_s:,.0f} records/s)", export, None,
            ">= 1,000 records/s", met=records_per_s >= 1000, ratio=f"{records_per_s:,.0f}/s",
        ),
        Row(
            f"the same capture, by `{user}` on `{host}` ({named_per_s:,.0f} records/s)",
            export_named, None, ">= 1,000 records/s", met=named_per_s >= 1000,
            ratio=f"{named_per_s:,.0f}/s",
        ),
        Row(
            f"export a capture with {log_bytes / 1e6:.0f} MB of raw logs ({log_rate:.0f} MB/s)",
            export_logs, None, ">= 50 MB/s", met=log_rate >= 50, ratio=f"{log_rate:.0f} MB/s",
        ),
    ]  # fmt: skip


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    openssl = subprocess.run(["openssl", "version"], capture_output=True, text=True, check=False)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{cores} cores ({cpu}), Python {platform.python_version()}, "
        f"{openssl.stdout.strip()}, {platform.system()} {platform.release()}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per case (medians)")
    parser.add_argument("--records", type=int, default=10_000, help=RECORDS_HELP)
    parser.add_argument(
        "--export-repeat", type=int, default=None, help="runs per export case (default --repeat)"
    )
    parser.add_argument("--shards", type=int, default=3, help="weight files of the model")
    parser.add_argument("--shard-mib", type=int, default=1024, help="size of each weight file")
    parser.add_argument("--log-mb", type=int, default=100, help="raw logs of the export case")
    parser.add_argument(
        "--only", choices=("hash", "startup", "bundles"), action="append", help="run only these"
    )
    parser.add_argument("--tmp", type=Path, default=None, help="where the inputs go (/tmp)")
    parser.add_argument(
        "--repo", type=Path, default=REPO, help="checkout to measure (e.g. main, for a before)"
    )
    args = parser.parse_args(argv)
    only = set(args.only or ("hash", "startup", "bundles"))
    CHECKOUT[0] = args.repo.resolve()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="evidence-bench-", dir=args.tmp) as scratch:
        if "hash" in only:
            rows += bench_hashing(Path(scratch), args.repeat, args.shards, args.shard_mib)
        if "startup" in only:
            rows += bench_startup(args.repeat)
        if "bundles" in only:
            export_repeat = args.export_repeat or args.repeat
            rows += bench_bundles(
                Path(scratch), args.repeat, export_repeat, args.records, args.log_mb
            )
    runs = f"medians of {args.repeat} runs each"
    if "bundles" in only and (args.export_repeat or args.repeat) != args.repeat:
        runs += f" ({args.export_repeat} of each export)"
    print_table(rows, f"{runs}, interleaved; {machine()}")
    failed = [row.what for row in rows if not row.met]
    print()
    print(f"{len(rows) - len(failed)} of {len(rows)} targets met" + (
        "; not met: " + "; ".join(failed) if failed else ""
    ))  # fmt: skip


if __name__ == "__main__":
    main()
