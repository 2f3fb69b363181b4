"""Evidence that must hang together: the named server, its command lines, its toggles,
and one request per record in time order. A bundle that borrows another server's rules,
runs conditions that differ by undeclared flags, or copies records fails here."""

from __future__ import annotations

import functools
import itertools
import json
import re
import shlex
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import PurePosixPath
from typing import Any

from verifier import layout
from verifier.canonical import OutputHashError, canonical_output
from verifier.checks.context import BundleContext, occurrences
from verifier.model import Finding, Severity, json_pointer
from verifier.profiles import KNOWN_RULES, PROFILES
from verifier.profiles.base import ServerProfile
from verifier.profiles.rules import ProfileRules
from verifier.proofs import completion_count, unfinished
from verifier.records import Condition, Experiment, Record, ServerDeclaration

CHECK = "consistency"


def _error(message: str, file: str = layout.EXPERIMENT, pointer: str | None = None,
           expected: str | None = None, actual: str | None = None) -> Finding:  # fmt: skip
    return Finding(CHECK, Severity.ERROR, message, file, pointer, expected, actual)


def check_consistency(ctx: BundleContext) -> Iterator[Finding]:
    experiment, rules = ctx.experiment, ctx.rules
    if experiment is None:
        return
    if experiment.attached and len(experiment.conditions) > 1:
        yield _error(
            "an attached capture runs one server configuration, yet declares "
            f"{len(experiment.conditions)} conditions",
            pointer="/conditions",
        )
    if rules is not None:
        yield from _the_named_server(ctx, experiment, rules)
        yield from _command_lines(experiment, rules)
        yield from _served_model(ctx, experiment, rules)
    yield from _distinct_conditions(experiment, ctx.profile)
    yield from _switched_on(ctx, experiment)
    yield from _one_request_per_record(ctx, experiment)
    yield from _one_model(ctx)
    yield from _one_server_at_a_time(experiment)
    yield from _answers_in_time(ctx)
    yield from _one_build(ctx, experiment)
    yield from _empty_fields_alike(ctx, experiment)
    # (the answers that ended by themselves, which the next two compare)
    finished = [
        r
        for r in ctx.records
        if r.http_status == 200 and r.output_hash is not None and not unfinished(r)
    ]
    yield from _empty_think_alike(finished)
    yield from _parsed_alike(finished)


# What each kind of switched evidence (`ServerProfile.switches`) is, as a message says it.
_SWITCHED = {"metrics": "/metrics readings", "cached_tokens": "cached_tokens in its answers"}
# An environment variable set to one of these turns its switch off (llama-server's falsey
# values, and what reads as none).
_OFF = frozenset({"", "0", "false", "off", "disabled", "no"})


def _switched_on(ctx: BundleContext, experiment: Experiment) -> Iterator[Finding]:
    """Evidence a server gives only where it was started to (`ServerProfile.switches`) is
    in the records of a server whose declared command line or environment asks for it:
    /metrics readings from a llama-server declared without --metrics, or cached_tokens
    from a vLLM declared without --enable-prompt-tokens-details, are a warning. Not an
    error: what a server gives unasked is a fact of its build (a profile's version spans
    many), and a server may be started by a wrapper that adds flags it does not show; the
    proofs still need the evidence itself. One finding for each server and kind of
    evidence; a server attached to, or whose command line is not recorded or names a
    config file (what it sets is not known here), is not judged."""
    profile, rules = ctx.profile, ctx.rules
    switches = profile.switches if profile is not None else {}
    if profile is None or rules is None or not switches or experiment.attached:
        return
    asked: dict[tuple[object, ...], bool] = {}  # (the servers of a sweep share a command line)

    def lacking(server: ServerDeclaration) -> list[str]:
        kinds = []
        for what, by in switches.items():
            key = (server.argv, by, *(server.environment.get(n) for n in by if n[:1] != "-"))
            if key not in asked:
                asked[key] = _asked(profile, server, by)
            if not asked[key]:
                kinds.append(what)
        return kinds

    declared = {  # (an instance declared twice is an error of its own: the last is read)
        (condition.id, server.instance): (ci, si, server)
        for ci, condition in enumerate(experiment.conditions)
        for si, server in enumerate(condition.servers)
    }
    unasked = {  # each server's kinds of evidence its declared start does not ask for
        key: (ci, si, server, kinds)
        for key, (ci, si, server) in declared.items()
        if (kinds := lacking(server))
    }
    if not unasked:  # (every honest capture: the harness starts each server asking)
        return
    judged: set[tuple[str, int, str]] = set()
    for record in ctx.records:
        found = unasked.get((record.condition, record.server_instance))
        if found is None:
            continue
        ci, si, server, kinds = found
        for what in kinds:
            key = (record.condition, record.server_instance, what)
            if key in judged or not _gives(record, what, rules):
                continue
            judged.add(key)
            yield Finding(
                CHECK, Severity.WARNING,
                f"the records of server {server.instance} of condition {record.condition} "
                f"hold {_SWITCHED.get(what, what)} ({record.file} first), which "
                f"{profile.server_name} gives only when started with "
                f"{' or '.join(switches[what])}; its declared command line and environment "
                "ask for none of them: the evidence may not be from the server as declared "
                "(or from a build that gives it unasked)",
                layout.EXPERIMENT, json_pointer("conditions", ci, "servers", si, "argv"),
            )  # fmt: skip


def _gives(record: Record, what: str, rules: ProfileRules) -> bool:
    """Whether the record holds switched evidence of the kind `what`."""
    if what == "metrics":
        return bool(record.before.metrics) or bool(record.after.metrics)
    if what == "cached_tokens":
        return record.response_value(rules.cached_tokens_pointer) is not None
    return False


def _asked(
    profile: ServerProfile, server: ServerDeclaration, turned_on_by: tuple[str, ...]
) -> bool:
    """Whether the server's declared start asks for the evidence: one of `turned_on_by` on
    its command line (in any spelling the server reads, a long option cut short as
    argparse takes it, or with a value), the last of it and its `--no-` form not being the
    latter; or one of the environment variables set to anything but an off value. A
    command line that is not recorded, or names a config file, may ask for anything."""
    argv = server.argv
    if not argv or any(arg.partition("=")[0] in ("--config", "--config-file") for arg in argv):
        return True
    flags = [
        spelling
        for flag in turned_on_by
        if flag.startswith("-")
        for spelling in profile.spellings(flag)
    ]
    environment = server.environment
    if any(
        not name.startswith("-") and environment.get(name, "").strip().lower() not in _OFF
        for name in turned_on_by
    ):
        return True
    on: bool | None = None
    for arg in argv[1:]:
        option = profile.option_name(arg)
        if not option.startswith("-") or option in ("-", "--"):
            continue
        for flag in flags:
            if option == flag or (
                len(option) > 4 and flag.startswith("--") and flag.startswith(option)
            ):
                on = True
            elif flag.startswith("--") and option == "--no-" + flag[2:]:
                on = False
    return bool(on)


def _distinct_conditions(
    experiment: Experiment, profile: ServerProfile | None
) -> Iterator[Finding]:
    """Each condition is its own configuration: no two declare the same settings and server
    arguments, read as the server reads them (a switch's `on` is its `1`; an option in any
    spelling, in any order: `_option_pairs`). (Their command lines are then alike too, or
    `_command_lines` says they differ by arguments no condition declares; and so are their
    environments, or the servers check says they differ by an undeclared toggle.) Two
    such conditions are one
    configuration run twice, and an error, not each a condition judged alone: where their
    warm arms disagree, the configuration's own replies varied between two runs, yet each
    half would be judged by itself and the split reported "in 1 of 2 conditions", a
    difference between conditions that differ by nothing. An inconclusive verdict would
    hide the same bundle's other halves behind a reason a reader can skip; the harness
    never writes two such conditions (a run repeated is more cycles of one condition), so
    a bundle that does was not made by it as declared."""
    seen: dict[tuple[tuple[tuple[str, Any], ...], ...], str] = {}
    for ci, condition in enumerate(experiment.conditions):
        first = seen.setdefault(_configuration(condition, profile), condition.id)
        if first != condition.id:
            yield _error(
                f"conditions {first} and {condition.id} declare the same configuration: "
                f"{condition.label or 'no setting and no server argument'}; one "
                "configuration run twice is one condition, whose replies varied between "
                "the runs if they disagree, not two conditions that differ",
                pointer=json_pointer("conditions", ci), expected="a configuration of its own",
                actual=condition.label or "the same as " + first,
            )  # fmt: skip


def _configuration(
    condition: Condition, profile: ServerProfile | None
) -> tuple[tuple[tuple[str, Any], ...], ...]:
    """What a condition declares, as its server reads it: its server arguments as
    `_option_pairs` reads them, with each setting that an option sets too (the profile's
    `toggle_options`: llama-server's LLAMA_ARG_FLASH_ATTN is its `-fa`) read as that option,
    where no argument gives it (one that does decides, and the servers check says the
    setting was overridden); an option given more than once with one value, once (`-fa on
    -fa on` is `-fa on`), and one given without a value as a switch turned on (`--no-mmap`
    is LLAMA_ARG_NO_MMAP=1); a whole number in any spelling its parser reads (`0512`,
    `+512`, Python's `5_12`: `_whole`); the other settings by name."""
    read = _option_pairs(condition.server_args, profile)
    options = {key: tuple(_whole(v) or "1" for v in values) for key, values in read if key}
    settings: list[tuple[str, str]] = []
    for name, value in condition.settings.items():
        sets = profile.toggle_options(name) if profile is not None else ()
        if sets and profile is not None:
            options.setdefault(_option_key(sets[0], profile), (_whole(_plain(value)),))
        else:
            settings.append((name, _whole(_plain(value))))
    named = tuple(
        sorted(
            (key, values[:1] if len(set(values)) == 1 else values)
            for key, values in options.items()
        )
    )
    return tuple(sorted(settings)), named + tuple(pair for pair in read if not pair[0])


_WHOLE = re.compile(r"\s*[+-]?[0-9][0-9_]*\s*")


def _whole(value: str) -> str:
    """A whole number as one spelling (`0512`, `+512`, ` 512`, `5_12`: `512`), as the
    servers' parsers read it (C++'s std::stoi, Python's int); any other value as it is."""
    if _WHOLE.fullmatch(value) and "__" not in value and not value.strip().endswith("_"):
        return str(int(value.replace("_", "")))
    return value


# The values a server reads as one switch's on and off (llama.cpp's is_truthy and
# is_falsey, Python's and Rust's usual readings of an environment flag).
_TRUTHY = frozenset(("1", "true", "on", "yes", "enabled"))
_FALSY = frozenset(("0", "false", "off", "no", "disabled"))


def _plain(value: str) -> str:
    """A setting's value as a switch reads it: `on`, `true` and `1` alike."""
    folded = value.strip().casefold()
    return "1" if folded in _TRUTHY else "0" if folded in _FALSY else value


def _option_pairs(
    args: tuple[str, ...], profile: ServerProfile | None
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Server arguments as (option, values) pairs, as the server reads them: an option in
    any spelling (`-fa`, `--flash-attn`, `--flash_attn`), in any order; each value of one
    given more than once, in order (`-ot a -ot b` places two tensors, `--lora a --lora b`
    stacks two adapters: not `-ot b`); a value as a switch reads it (`_plain`); a
    positional argument as itself."""
    options: dict[str, tuple[str, ...]] = {}
    positional: list[tuple[str, tuple[str, ...]]] = []
    at = 0
    while at < len(args):
        arg = args[at]
        if arg.startswith("-") and arg != "-":
            value = ""
            if "=" in arg:
                value = arg.partition("=")[2]
            elif at + 1 < len(args) and (
                not args[at + 1].startswith("-") or _NEGATIVE.fullmatch(args[at + 1])
            ):
                at += 1
                value = args[at]
            key = _option_key(arg, profile)
            options[key] = (*options.get(key, ()), _plain(value))
        else:
            positional.append(("", (arg,)))
        at += 1
    return tuple(sorted(options.items())) + tuple(positional)


_NEGATIVE = re.compile(r"-[0-9]+(?:\.[0-9]+)?")  # a value, not an option (`-ngl -1`)


def _option_key(arg: str, profile: ServerProfile | None) -> str:
    """The option an argument gives, one name for all its spellings (`-fa`, `--flash-attn`,
    `--flash_attn`: the least of them)."""
    name = profile.option_name(arg) if profile is not None else arg.partition("=")[0]
    return min(profile.spellings(name) if profile is not None else (name,))


def _the_named_server(
    ctx: BundleContext, experiment: Experiment, rules: ProfileRules
) -> Iterator[Finding]:
    name = experiment.document["server"].get("name")
    if rules.server_name is not None and name != rules.server_name:
        yield _error(
            f"the {rules.key} profile is for {rules.server_name}, not this server",
            pointer="/server/name", expected=rules.server_name, actual=str(name),
        )  # fmt: skip
    # Toggles of another server: a sign that the evidence is not from the one named.
    foreign = tuple(
        prefix
        for other in KNOWN_RULES.values()
        if other.name != rules.name
        for prefix in other.toggle_prefixes
        if not prefix.startswith(rules.toggle_prefixes)
    )
    for ci, condition in enumerate(experiment.conditions):
        for si, server in enumerate(condition.servers):
            for key in sorted(server.environment):
                if key.startswith(rules.toggle_prefixes) or not key.startswith(foreign):
                    continue
                yield _error(
                    f"{key} is a toggle of another server, not of "
                    f"{rules.server_name or rules.name} ({', '.join(rules.toggle_prefixes)})",
                    pointer=json_pointer("conditions", ci, "servers", si, "environment", key),
                )  # fmt: skip
    if not rules.has_stats:
        for record in ctx.records:
            if record.before.cache_stats is not None or record.after.cache_stats is not None:
                yield _error(
                    f"a cache stats document that {rules.server_name or rules.name} does not "
                    "have: the evidence is not from the server the profile names",
                    file=record.file, pointer="/telemetry",
                )  # fmt: skip
                break


def _without(argv: list[str], part: tuple[str, ...]) -> None:
    """Remove every occurrence, so that a condition's flags given twice cannot hide the same
    flags, undeclared, in another condition. (Each occurrence is found from the end of the
    one before, and the rest is kept in one pass: linear in the lengths of both.)"""
    if not part:
        return
    kept: list[str] = []
    at = 0
    for start in occurrences(argv, part):
        if start >= at:
            kept += argv[at:start]
            at = start + len(part)
    argv[:] = kept + argv[at:]


def normalized_command_line(
    server: ServerDeclaration, rules: ProfileRules, condition_args: tuple[str, ...]
) -> tuple[str, ...]:
    """A command line without what may differ between the servers of an experiment: the
    cache-off flag of a cache-off server (and the cache-on flag of a cache-on one, where the
    profile writes one), the condition's declared server arguments and the per-server
    scratch values."""
    argv = list(server.argv)
    if server.cache_disabled:
        _without(argv, rules.cache_off_args)
    else:  # what the harness writes to say the cache is on (vLLM's --enable-prefix-caching)
        profile = PROFILES.get(rules.name)
        _without(argv, profile.cache_on_args if profile is not None else ())
    _without(argv, condition_args)
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            out.append("<per-server>")
            skip = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag in rules.per_instance_args:
            if eq:
                out.append(f"{flag}=<per-server>")
            else:
                out.append(arg)
                skip = True
            continue
        out.append(arg)
    return tuple(out)


def _command_lines(experiment: Experiment, rules: ProfileRules) -> Iterator[Finding]:
    reference: tuple[str, ...] | None = None
    for ci, condition in enumerate(experiment.conditions):
        # Each option that sets what one of the condition's settings sets (once a condition)
        options = {
            o: toggle for toggle in condition.settings for o in _toggle_options(rules, toggle)
        }
        for si, server in enumerate(condition.servers):
            pointer = json_pointer("conditions", ci, "servers", si, "argv")
            if not server.argv:
                yield _error("a server declared without its command line", pointer=pointer)
                continue
            yield from _overridden(server.argv, condition, rules, options, pointer)
            argv = normalized_command_line(server, rules, condition.server_args)
            if reference is None:
                reference = argv
            elif argv != reference:
                yield _error(
                    "this server's command line differs from the first server's beyond the "
                    "cache-off flag: the servers differ by arguments no condition declares",
                    pointer=pointer, expected=" ".join(reference), actual=" ".join(argv),
                )  # fmt: skip


# The files a server loads a model from, by their suffix: one such file named on its command
# line is the model it serves.
_MODEL_FILE = re.compile(r".+\.(?:gguf|safetensors|bin|pt|pth|onnx|ggml)", re.IGNORECASE)


def _model_named(server: ServerDeclaration, profile: ServerProfile) -> Iterator[tuple[str, str]]:
    """Each place the server is told which model to load, as (where, value): the profile's
    model options on the command line, and the environment variables that set them
    (`LLAMA_ARG_MODEL` is llama-server's `--model`), and a positional model where the
    server takes one (`vllm serve MODEL`)."""
    return profile.models_named(server.argv, server.environment)


def _file_name(value: str) -> str:
    """The file a path or URL names: its last component, without a URL's query or fragment
    (`https://host/x.gguf?download=true` names `x.gguf`)."""
    if "://" in value:
        value = value.partition("#")[0].partition("?")[0]
    return value.replace("\\", "/").rstrip("/").rpartition("/")[2]


def _served_model(
    ctx: BundleContext, experiment: Experiment, rules: ProfileRules
) -> Iterator[Finding]:
    """The model a server loads is the declared one: a model file named by the profile's
    model options (or the environment variables that set them) is the declared
    `model_file`, and the model is named once (of several, the server loads one the others
    do not say). A server whose option always names one file (`model_is_file`) is held to
    that name whatever its suffix (`x.gguf.1`, `other`). A model file served where no
    model_file is declared is an error too: export always names it, and without it
    model_sha256 would stand for any digest of the manifest."""
    profile = PROFILES.get(rules.name)
    model = experiment.document.get("model")
    declared = model.get("model_file") if isinstance(model, dict) else None
    if profile is None:
        return
    if not isinstance(declared, str):
        declared = None
    manifest = ctx.valid(layout.MODEL_MANIFEST)
    listed = {
        _file_name(entry["path"])
        for entry in (manifest["files"] if isinstance(manifest, dict) else ())
    }
    declared_name = _file_name(declared) if declared is not None else None
    served: dict[str, str] = {}  # each model a server is told to load -> the first pointer
    for ci, condition in enumerate(experiment.conditions):
        for si, server in enumerate(condition.servers):
            named = list(_model_named(server, profile))
            pointer = json_pointer("conditions", ci, "servers", si, "argv")
            for _, value in named:  # (the whole value: `/a/x.gguf` and `/b/x.gguf` are two)
                served.setdefault(value.replace("\\", "/").rstrip("/"), pointer)
            if not named and profile.model_is_file and server.argv:
                yield _error(
                    "the command line names no model file: the server was not told to load "
                    "the declared one (llama-server without -m serves models on demand)",
                    pointer=pointer, expected=f"-m .../{declared or 'MODEL_FILE'}",
                )  # fmt: skip
            if len(named) > 1:
                yield _error(
                    f"the server is told {len(named)} times which model to load: it loads one "
                    "of them, whatever the others say",
                    pointer=pointer, actual="; ".join(where for where, _ in named),
                )  # fmt: skip
            for where, value in named:
                name = _file_name(value)
                # (a name export redacted, `<private-1>-7b.gguf`, is redacted alike in both)
                if name == declared_name:
                    continue
                if not (profile.model_is_file or _MODEL_FILE.fullmatch(name)):
                    continue  # a folder, or a repository's name
                if declared is None:
                    yield _error(
                        f"the server loads the model file {name}, but model_file is not "
                        "declared: model_sha256 is not known to be the served file's",
                        pointer=pointer, actual=where,
                    )  # fmt: skip
                    continue
                if name in listed:
                    yield Finding(
                        CHECK, Severity.WARNING,
                        f"the server loads the model file {name}, which the manifest lists, "
                        f"but model_file names {declared}: model_sha256 is not the served "
                        "file's (the manifest's entry for it is)",
                        layout.EXPERIMENT, pointer, declared, where,
                    )  # fmt: skip
                    continue
                yield _error(
                    f"the server loads the model file {name}, not the declared model_file "
                    f"{declared}, and the manifest does not list it: the manifest's hashes "
                    "are not of the model it served",
                    pointer=pointer, expected=declared, actual=where,
                )  # fmt: skip
    if len(served) > 1:
        # One experiment is one model (EVIDENCE.md): servers told to load different ones
        # compare two models, whatever the conditions say they vary.
        (first, _), *others = served.items()
        yield _error(
            f"the servers load {len(served)} different models: an experiment compares one "
            "model's replies, and these would be two models' (the first server loads "
            f"{first})",
            pointer=others[0][1], expected=first, actual=", ".join(name for name, _ in others),
        )  # fmt: skip


_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
# `sh -c 'unset NAME OTHER; exec ...'`: the names a shell's unset takes out
_UNSET = re.compile(
    r"\bunset\s+(?:-[fnv]+\s+)*([A-Za-z_][A-Za-z0-9_]*(?:[ \t]+[A-Za-z_][A-Za-z0-9_]*)*)"
)
# env's options that take a value (GNU coreutils and BSD env): `-C DIR`, `-P PATH`, `-a ARG0`
_ENV_VALUED = frozenset(("-C", "--chdir", "-P", "-a", "--argv0", "--default-signal",
                         "--ignore-signal", "--block-signal"))  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _program(word: str) -> str:
    """`PurePosixPath(word).name`: the program a word of a command line names. Each server's
    command line is read word by word for `env` and for launchers, and a bundle's servers
    repeat the same few words (some 60,000 paths made for the 2,148 servers of
    `make bench`'s bundle)."""
    return PurePosixPath(word).name


def _env_removes(argv: tuple[str, ...]) -> Iterator[tuple[str, str | None]]:
    """What a wrapper before the server takes out of the environment it passes on, as (as
    written, the name taken out, or None where the whole environment is): `env -u NAME`,
    `env -uNAME`, `env --unset=NAME`, `env -i` (`--ignore-environment`, `-`), the same in an
    `env -S '...'` string, and a shell's `unset NAME` (`sh -c 'unset NAME; exec ...'`).
    An argument that holds a command line of its own (`sh -c 'env -u NAME server'`) is read
    as one too."""
    for at, arg in enumerate(argv):
        if _program(arg) == "env":
            yield from _env_options(argv[at + 1 :], depth=0)
        for found in _UNSET.finditer(arg):
            for name in found.group(1).split():
                yield found.group(0), name
        if "env" in arg and any(c.isspace() for c in arg):
            try:
                words = tuple(shlex.split(arg))
            except ValueError:  # (an unclosed quote: no command line a shell would run)
                continue
            for wi, word in enumerate(words):
                if _program(word) == "env":
                    yield from _env_options(words[wi + 1 :], depth=0)


def _env_options(args: tuple[str, ...], depth: int) -> Iterator[tuple[str, str | None]]:
    """`env`'s options up to its command (`_env_removes`)."""
    index = 0
    while index < len(args):
        arg = _env_long(args[index])
        after = args[index + 1] if index + 1 < len(args) else None
        if arg in ("-", "-i", "--ignore-environment"):
            yield arg, None
        elif arg == "--unset" or arg.startswith("--unset="):
            name = arg.partition("=")[2] if "=" in arg else after
            index += 0 if "=" in arg else 1
            if name is not None:
                yield (arg if "=" in arg else f"{arg} {name}"), name
        elif arg == "--split-string" or arg.startswith("--split-string="):
            string = arg.partition("=")[2] if "=" in arg else after
            index += 0 if "=" in arg else 1
            yield from _env_split(string, depth)
        elif arg == "--":
            return
        elif arg in _ENV_VALUED or arg.partition("=")[0] in _ENV_VALUED:
            index += 0 if "=" in arg else 1
        elif arg.startswith("--"):
            pass  # (--debug, --null, ...)
        elif arg.startswith("-"):  # a cluster of short options: `-iu NAME`, `-vS 'A=1 x'`
            for ci, letter in enumerate(arg[1:], 1):
                rest = arg[ci + 1 :]
                if letter == "i":
                    yield arg, None
                    continue
                if letter in "uSCPa":
                    value = rest or after
                    index += 0 if rest else 1
                    if letter == "u" and value is not None:
                        yield (arg if rest else f"{arg} {value}"), value
                    elif letter == "S":
                        yield from _env_split(value, depth)
                    break
        elif _ASSIGNMENT.match(arg) is None:
            return  # the command env runs
        index += 1


# env's long options (GNU coreutils), which it takes shortened to any unambiguous start
# (`--uns=NAME` is `--unset=NAME`, `--ignore-env` is `--ignore-environment`).
_ENV_LONG = (
    "--ignore-environment", "--null", "--unset", "--chdir", "--split-string", "--argv0",
    "--block-signal", "--default-signal", "--ignore-signal", "--list-signal-handling",
    "--debug", "--help", "--version",
)  # fmt: skip


def _env_long(arg: str) -> str:
    """An env long option written in full (`--uns=NAME`: `--unset=NAME`); anything else as
    it is."""
    name, eq, value = arg.partition("=")
    if not name.startswith("--") or name == "--" or name in _ENV_LONG:
        return arg
    meant = [option for option in _ENV_LONG if option.startswith(name)]
    return meant[0] + eq + value if len(meant) == 1 else arg


# Programs that run another with another user's environment, a reset or emptied one, or a
# script of their own (a shell's `-c`, which may unset or export anything): a server started
# through one ran with an environment or arguments the bundle cannot show.
_LAUNCHERS = frozenset((
    "sudo", "su", "doas", "runuser", "run0", "pkexec", "setpriv", "capsh", "sg", "chroot",
    "nsenter", "unshare", "systemd-run", "systemd-nspawn", "machinectl", "firejail", "bwrap",
    "docker", "podman", "nerdctl", "apptainer", "singularity", "flatpak-spawn", "ssh",
    "srun", "script", "dotenv", "direnv", "conda", "mamba", "micromamba", "pipenv",
    "poetry", "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
))  # fmt: skip


def _launchers(argv: tuple[str, ...]) -> Iterator[str]:
    """Each launcher (`_LAUNCHERS`) the command line runs, where a word names it: at the
    start, or after a word that is no option waiting for its value (`nice -n 5 sudo ...`,
    `taskset -c 0 sh -c ...`; not `--chat-template bash`)."""
    for at, arg in enumerate(argv):
        if _program(arg) in _LAUNCHERS:
            before = argv[at - 1] if at else ""
            # (`-n5`, `-oL`, `--x=y`: an option with its value in one word waits for none)
            waiting = before[:1] == "-" and "=" not in before and len(before.lstrip("-")) < 2
            waiting |= before.startswith("--") and "=" not in before
            if not waiting:
                yield arg


def _env_split(string: str | None, depth: int) -> Iterator[tuple[str, str | None]]:
    """The options of an `env -S STRING` (its words, read as env's own arguments)."""
    if string is None or depth > 3:
        return
    try:
        words = tuple(shlex.split(string))
    except ValueError:
        return
    yield from _env_options(words, depth + 1)


def _toggle_options(rules: ProfileRules, toggle: str) -> tuple[str, ...]:
    """The options of the rules' server that set what `toggle` sets (ServerProfile's)."""
    profile = PROFILES.get(rules.name)
    return profile.toggle_options(toggle) if profile is not None else ()


def _overridden(
    argv: tuple[str, ...],
    condition: Condition,
    rules: ProfileRules,
    options: dict[str, str],
    pointer: str,
) -> Iterator[Finding]:
    """What the command line itself says against what is declared: a per-server option
    followed by an option makes that option its value (`--slot-save-path --no-cache-prompt`
    is no cache-off flag); a toggle assigned in it (`env NAME=1 server ...`), or an option
    that sets what a condition's toggle sets (`options`: `-fa` for LLAMA_ARG_FLASH_ATTN),
    overrides the recorded environment; and a declared server argument's option given again
    after it, by any spelling, overrides the declaration (the last of an option given twice
    is the one a server reads). An option is read as the server's parser reads it
    (`ServerProfile.option_name`: llama-server's `--flash_attn` is `--flash-attn`); a toggle
    an `env` before the server takes out (`env -u NAME`, `env -i`) overrides the recorded
    environment as one assigned there does; and so may a launcher (`_LAUNCHERS`: `sudo`, a
    shell) the server is started through."""
    profile = PROFILES.get(rules.name)

    def named(arg: str) -> str:
        return profile.option_name(arg) if profile is not None else arg.partition("=")[0]

    def toggle(name: str) -> bool:
        return name in condition.settings or any(p in name for p in rules.toggle_prefixes)

    for launcher in _launchers(argv):
        yield _error(
            f"the command line starts the server through {launcher}, which may run it with "
            "another environment or other arguments than it shows: the environment recorded "
            "for this server is not known to be what it ran with",
            pointer=pointer, actual=launcher,
        )  # fmt: skip
    for written, name in _env_removes(argv):
        if name is None:
            yield _error(
                f"the command line starts the server in an emptied environment ({written}): "
                "the environment recorded for this server is not what it ran with",
                pointer=pointer, actual=written,
            )  # fmt: skip
        elif toggle(name):
            yield _error(
                f"the command line takes {name} out of the server's environment ({written}): "
                "the environment recorded for this server is not what it ran with",
                pointer=pointer, actual=written,
            )  # fmt: skip
    for index, arg in enumerate(argv):
        if named(arg) in rules.per_instance_args and argv[index + 1 : index + 2] != ():
            value = argv[index + 1]
            if value.startswith("-"):  # (its value is left out of the comparison)
                yield _error(
                    f"{arg} takes a value, and what follows it is an option: {value} is then "
                    f"{arg}'s value, not an option the server reads",
                    pointer=pointer, actual=f"{arg} {value}",
                )  # fmt: skip
        # `env NAME=1 ...`, `env --split-string=NAME=1`, `sh -c 'export NAME=1; ...'`
        for name in _ASSIGNMENT.findall(arg):
            if toggle(name):
                yield _error(
                    f"the command line sets {name} itself: the environment recorded for this "
                    "server is not what it ran with",
                    pointer=pointer, actual=arg,
                )  # fmt: skip
                break
        option = named(arg)
        if option in options:
            yield _error(
                f"the command line gives {arg.partition('=')[0]}, which sets what the "
                f"condition's setting "
                f"{options[option]} sets: the server ran with the command line's",
                pointer=pointer, actual=arg,
            )  # fmt: skip
    declared = condition.server_args
    if not declared:
        return
    last = max(occurrences(argv, declared), default=None)
    if last is None:
        return  # the servers check says the declared arguments are missing
    again = {  # the declared options, in every spelling (`--flash-attn`, `-fa`)
        spelling
        for a in declared
        if a.startswith("-")
        for spelling in (profile.spellings(named(a)) if profile else (a,))
    }
    for arg in argv[last + len(declared) :]:
        if named(arg) in again:
            option = arg.partition("=")[0]
            yield _error(
                f"{option} is given again after the condition's declared server arguments: "
                "the server reads the last one, not the declared value",
                pointer=pointer, expected=" ".join(declared), actual=arg,
            )  # fmt: skip


_FINGERPRINT_COMMIT = re.compile(r"b[0-9]+-([0-9a-f]{7,40})", re.IGNORECASE)


def _same_commit(named: str, declared: str) -> bool:
    """Whether two spellings of a git commit name the same one: one a prefix of the other,
    of 7 hex digits at least (git's shortest abbreviation; `0` would be any commit's)."""
    a, b = named.lower(), declared.lower()
    return min(len(a), len(b)) >= 7 and (a.startswith(b) or b.startswith(a))


def _not_declared(
    said: str, commit: str, declared: object, file: str, pointer: str, actual: str
) -> Iterator[Finding]:
    """An error where a commit something names (`said`) is not the declared build_commit
    (none where the experiment declares none)."""
    if isinstance(declared, str) and declared and not _same_commit(commit, declared):
        yield _error(
            f"{said}, not the declared build_commit {declared}",
            file=file, pointer=pointer, expected=declared, actual=actual,
        )  # fmt: skip


def _one_build(ctx: BundleContext, experiment: Experiment) -> Iterator[Finding]:
    """One experiment runs one server build: every answer's `system_fingerprint` is the
    same, and where it names a commit (llama-server's `b<build>-<commit>`), it is the
    declared `build_commit`; so is the commit the server's version text names (the
    profile's `version_commit`), which stands where the answers carry no fingerprint."""
    server = experiment.document["server"]
    declared = server.get("build_commit")
    profile = ctx.profile
    version = server.get("version")
    named_commit = None
    if profile is not None and isinstance(version, str):
        named_commit = profile.version_commit(version)
    if named_commit:
        yield from _not_declared(
            f"the server's version names commit {named_commit}", named_commit, declared,
            layout.EXPERIMENT, "/server/version", named_commit,
        )  # fmt: skip
    yield from _binary_mapped(experiment)
    first: tuple[str, str] | None = None
    answers = [r for r in ctx.records if r.http_status == 200]
    lacking = [r for r in answers if not isinstance(r.response_value("/system_fingerprint"), str)]
    if lacking and len(lacking) < len(answers):  # one build names itself in all or none
        yield _error(
            f"{len(lacking)} of {len(answers)} answers lack the system_fingerprint the others "
            "carry: one server build writes it in every answer or in none",
            file=lacking[0].file, pointer="/response/system_fingerprint",
        )  # fmt: skip
    for record in answers:
        fingerprint = record.response_value("/system_fingerprint")
        if not isinstance(fingerprint, str):
            continue
        if first is None:
            first = (fingerprint, record.file)
            named = _FINGERPRINT_COMMIT.fullmatch(fingerprint)
            if named is not None:
                commit = named.group(1).lower()
                yield from _not_declared(
                    f"the answers come from commit {commit} (system_fingerprint)", commit,
                    declared, record.file, "/response/system_fingerprint", fingerprint,
                )  # fmt: skip
        elif fingerprint != first[0]:
            yield _error(
                f"this answer names another server build than {first[1]} "
                "(system_fingerprint): one experiment runs one build",
                file=record.file, pointer="/response/system_fingerprint",
                expected=first[0], actual=fingerprint,
            )  # fmt: skip
            return


# The parts of a reply that the output hash reads, each of which a server may write, where
# it holds nothing, as left out, null, or empty ([] or "").
_HASHED_PARTS = ("content", "tool_calls", "reasoning_content", "reasoning")


def _empty_shape(message: dict[str, Any], name: str) -> str | None:
    """How `message` writes its field `name` where it holds nothing; None where it holds
    something (text, a call, some reasoning) or is not JSON's null or an empty string or
    list."""
    if name not in message:
        return "left out"
    value = message[name]
    if value is None:
        return "null"
    if value == [] or value == "":
        return json.dumps(value)
    return None


def _unwritten(output: dict[str, Any]) -> str:
    """A canonical output (`canonical_output`) with each part that holds nothing as null,
    as JSON: the same for two outputs that differ only in how they write nothing."""
    return json.dumps(
        {name: value if value not in ("", []) else None for name, value in output.items()},
        sort_keys=True,
    )


def _empty_fields_alike(ctx: BundleContext, experiment: Experiment) -> Iterator[Finding]:
    """A split made of nothing: two answers of one condition whose outputs differ only in
    how a part that holds nothing is written (`tool_calls: []` against none, `content: ""`
    against null, an empty reasoning against none). The output hash tells these apart
    (EVIDENCE.md), and one server build writes the same reply the same way: vLLM sends
    `tool_calls: []` in every answer, SGLang null (and `[]` where it found a call's marker
    but no call: a reply cut there), llama.cpp and mlxcel leave it out. Replies that do not
    say they ended by themselves (`proofs.FINISHED`) are left to the classification, which
    reads a reply cut short as the start of another; finish_reason is not in the hash, so
    it does not set two replies that ended apart (a warm `finish_reason: "tool_calls"`
    beside the cold ones' `stop` would make any split of nothing pass). The outputs are
    compared only in a condition whose answers write some empty part in two ways (nearly
    none: each part read once per answer)."""
    shapes: dict[str, set[tuple[str, str]]] = {}
    answers: dict[str, list[Record]] = {}  # each condition's answers that ended by themselves
    for record in ctx.records:
        if record.http_status != 200 or record.output_hash is None:
            continue
        message = record.response_value("/choices/0/message")
        if not isinstance(message, dict):
            continue
        if not unfinished(record):  # (a reply cut short is the start of another: classify's)
            answers.setdefault(record.condition, []).append(record)
        seen = shapes.setdefault(record.condition, set())
        for name in _HASHED_PARTS:
            shape = _empty_shape(message, name)
            if shape is not None:
                seen.add((name, shape))
    for condition in experiment.conditions:
        seen = shapes.get(condition.id, set())
        if len(seen) == len({name for name, _ in seen}):
            continue  # each empty part written one way
        first: dict[str, Record] = {}  # output with nothing written alike -> its first answer
        for record in answers.get(condition.id, ()):
            try:
                output = canonical_output(record.response)
            except OutputHashError:
                continue  # (the output-hash check's finding)
            other = first.setdefault(_unwritten(output), record)
            if other.output_hash != record.output_hash:
                yield _error(
                    f"this answer's output differs from {other.file}'s only in how a part "
                    "that holds nothing is written (left out, null, [] or \"\"): one "
                    "server build writes the same reply the same way, and the output hash "
                    "tells them apart, so the split would be made of nothing",
                    file=record.file, pointer="/response/choices/0/message",
                )  # fmt: skip
                break


# A reasoning block that holds nothing, at the start of a reply's content, as a server whose
# reasoning parser is off leaves it there (Qwen3's `<think>\n\n</think>\n\n` with thinking
# off); a server whose parser is on takes it out (`classify._unparsed` reads the same tags).
_EMPTY_THINK = re.compile(r"\s*<think>\s*</think>\s*")


def _empty_think_alike(finished: list[Record]) -> Iterator[Finding]:
    """A split made of nothing, written in the content: two answers of one condition that
    ended by themselves (`proofs.FINISHED`), whose outputs differ only by an empty reasoning
    block at the start of the content, there in one and not in the other, and that count
    the same completion tokens. The block is tokens the model
    generated: a reply that generated it and one that did not count differently, so the same
    count says one generation, written two ways, and one server build writes the same reply
    the same way (its parser takes the block out of every answer or of none). Where the
    counts differ (or one is not recorded as a count) the replies may be two generations,
    and are left to the classification; so are two blocks written with other white space
    (`<think>\n\n</think>` and `<think>\n</think>`: `\n` and `\n\n` are one token each in
    Qwen's vocabulary, so one count holds two token sequences). Only a condition where some
    answer's content starts with such a block is compared (nearly none)."""
    marked: set[str] = set()
    for record in finished:
        content = record.content
        # (anchored, and it fails at the first character that is neither white space nor
        # the block's: a reply without one costs a character or a few)
        if content is not None and _EMPTY_THINK.match(content):
            marked.add(record.condition)
    if not marked:
        return
    # Per condition, what each answer's output is without its empty block, with its count ->
    # each output hash met there, its first answer, and whether that one had the block.
    seen: dict[tuple[str, str, int], dict[str, tuple[Record, bool]]] = {}
    found: set[str] = set()  # conditions with a finding: one is enough
    for record, count, output in _counted_outputs(finished, marked, found):
        content = output["content"] or ""
        block = _EMPTY_THINK.match(content)
        rest = content[block.end() :] if block is not None else content.lstrip()
        key = (record.condition, _unwritten({**output, "content": rest}), count)
        hashes = seen.setdefault(key, {})
        for other, other_block in hashes.values():
            if other.output_hash != record.output_hash and (block is not None) != other_block:
                found.add(record.condition)
                yield _error(
                    f"this answer's output differs from {other.file}'s only by an empty "
                    "reasoning block (<think></think>) at the start of its content, and both "
                    f"count {count} completion tokens: one generation written two ways (a "
                    "server's reasoning parser takes the block out of every answer or of "
                    "none), so the split would be made of nothing",
                    file=record.file, pointer="/response/choices/0/message/content",
                )  # fmt: skip
                break
        hashes.setdefault(record.output_hash or "", (record, block is not None))


def _counted_outputs(
    answers: list[Record], marked: set[str], found: set[str]
) -> Iterator[tuple[Record, int, dict[str, Any]]]:
    """Each answer of a `marked` condition, while that condition is not in `found` (read as
    the caller adds to it), with its completion count and its canonical output; an answer
    without either is left out (the output-hash check's finding, or no count to compare)."""
    for record in answers:
        if record.condition not in marked or record.condition in found:
            continue
        count = completion_count(record)
        if count is None:
            continue
        try:
            output = canonical_output(record.response)
        except OutputHashError:
            continue
        yield record, count, output


# What a server whose parsers are off leaves in a reply's content, and one whose parsers
# are on takes out of it: a reasoning block at its start (`<think>...</think>`, or its end
# alone where the chat template opened it: Qwen3's and DeepSeek-R1's) and a tool call's raw
# text (Hermes' and Qwen's `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`).
_OPEN_THINK, _CLOSE_THINK = "<think>", "</think>"
_OPEN_CALL, _CLOSE_CALL = "<tool_call>", "</tool_call>"
_WHERE = ("its reasoning is", "its tool calls are")


def _parsed_alike(finished: list[Record]) -> Iterator[Finding]:
    """A split made of nothing, written by a parser: two answers of one condition that ended
    by themselves (`proofs.FINISHED`) and count the same completion tokens, whose outputs
    are one once a reasoning block or a tool call's raw text is read out of the content
    (`_as_generated`), where one answer has it in its content and the other in its
    reasoning or tool-call fields. A parser is a function of the text: one server build
    with one setting takes the block or the call out of every answer that holds it, or of
    none, so the same count says one generation written two ways (`_empty_think_alike` is
    this rule for a block that holds nothing). Only a condition where some answer's content
    holds `<think>` or `<tool_call>` is compared (nearly none)."""
    marked: set[str] = set()
    for record in finished:
        content = record.content
        # (a `<` first: one pass of memchr over a reply that holds none, as nearly all)
        if content and "<" in content and ("think>" in content or "<tool_call>" in content):
            marked.add(record.condition)
    if not marked:
        return
    seen: dict[tuple[Any, ...], list[tuple[Record, tuple[str, str]]]] = {}
    found: set[str] = set()  # conditions with a finding: one is enough
    for record, count, output in _counted_outputs(finished, marked, found):
        generated = _as_generated(output)
        if generated is None:
            continue
        text, forms = generated
        key = (record.condition, count, *text)
        for other, other_forms in seen.get(key, ()):
            moved = " and ".join(
                where
                for where, mine, theirs in zip(_WHERE, forms, other_forms, strict=True)
                if mine != theirs and "content" in (mine, theirs)
            )
            if other.output_hash != record.output_hash and moved:
                found.add(record.condition)
                yield _error(
                    f"this answer's output differs from {other.file}'s only in where "
                    f"{moved} written (in the content in one, in a field of its own in the "
                    f"other), and both count {count} completion tokens: one "
                    "generation written two ways (a server's parser takes them out of every "
                    "answer or of none), so the split would be made of nothing",
                    file=record.file, pointer="/response/choices/0/message",
                )  # fmt: skip
                break
        else:
            seen.setdefault(key, []).append((record, forms))


def _as_generated(
    output: dict[str, Any],
) -> tuple[tuple[str, str, tuple[tuple[Any, str], ...]], tuple[str, str]] | None:
    """A canonical output as its model generated it, whatever parsers took out of its
    content: (its reasoning, its content, its tool calls as (name, arguments) with the
    arguments as canonical JSON), and where each of its reasoning and its calls is written
    ("content", "field" or "none"). The white space a parser trims is not compared (around
    a block and a call, at the start of the content; all around it where a call was taken
    out). None where one is written both ways (a reasoning field and a block, calls and raw
    text) or a raw call is no call."""
    content: str = output["content"] or ""
    reasoning: str = (output["reasoning_content"] or "").strip()
    calls: list[dict[str, Any]] = output["tool_calls"] or []
    think = "field" if reasoning else "none"
    block = _think_block(content)
    if block is not None:
        if reasoning:
            return None
        reasoning, content, think = block[0], content[block[1] :], "content"
    raw, content = _raw_calls(content)
    if raw and (calls or None in raw):
        return None
    read = tuple(c for c in raw if c is not None) or tuple(map(_parsed_call, calls))
    call = "content" if raw else "field" if calls else "none"
    content = content.strip() if read else content.lstrip()
    return (reasoning, content, read), (think, call)


def _think_block(content: str) -> tuple[str, int] | None:
    """The reasoning of a block at the start of the content (`<think>R</think>`, or `R</think>`
    where the template opened it), stripped, and where the content after it starts; None
    where there is none, or it holds nothing (an empty one is `_empty_think_alike`'s)."""
    close = content.find(_CLOSE_THINK)
    if close < 0:
        return None
    head = content[:close].lstrip()
    if head.startswith(_OPEN_THINK):
        head = head[len(_OPEN_THINK) :]
    elif _OPEN_THINK in head:  # (text before the block: no block at the start)
        return None
    inner = head.strip()
    return (inner, close + len(_CLOSE_THINK)) if inner else None


def _raw_calls(content: str) -> tuple[list[tuple[Any, str] | None], str]:
    """Each call's raw text in the content (`<tool_call>...</tool_call>`, read as
    `_raw_call` reads it: None for one that is no call), and the content without them and
    the white space around each. (Read with `str.find`, once through the text: a pattern
    that starts with `\\s*` read a run of white space again from each of its places.)"""
    found: list[tuple[Any, str] | None] = []
    kept: list[str] = []
    at = 0
    while (start := content.find(_OPEN_CALL, at)) >= 0:
        end = content.find(_CLOSE_CALL, start + len(_OPEN_CALL))
        if end < 0:  # (not closed: no call, and none after it)
            break
        found.append(_raw_call(content[start + len(_OPEN_CALL) : end]))
        piece = content[at:start]
        kept.append(piece.rstrip() if not kept else piece.strip())
        at = end + len(_CLOSE_CALL)
    if not found:
        return found, content
    rest = content[at:]
    kept.append(rest.lstrip())
    return found, "".join(kept)


def _raw_call(text: str) -> tuple[Any, str] | None:
    """A raw call's (name, arguments), as `_parsed_call` reads a parsed one; None for text
    that is no call, or one this reading cannot write back (nested past the parser's depth,
    a NaN): such an answer is not compared."""
    try:
        call = json.loads(text)
    except (ValueError, RecursionError):
        return None
    # (arguments as an object only, as the formats write them: what a parser makes of
    # arguments left out or written as text is not known here)
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return None
    if not isinstance(call.get("arguments"), dict):
        return None
    arguments = _arguments(call["arguments"])
    return None if arguments is None else (call["name"], arguments)


def _parsed_call(call: dict[str, Any]) -> tuple[Any, str]:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    written = _arguments(arguments)
    # (arguments sent as text this reading cannot write back: compared as the text)
    return function.get("name"), written if written is not None else json.dumps(arguments)


def _arguments(arguments: Any) -> str | None:
    """A call's arguments as canonical JSON, whether sent as an object or as its text (text
    that is no JSON as itself); None where they cannot be written so."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return json.dumps(arguments)
    try:
        return json.dumps(arguments, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _binary_mapped(experiment: Experiment) -> Iterator[Finding]:
    """The server binary the process maps recorded (`runtime_libraries`: the executable is
    mapped too, under its file name) is the declared `binary_sha256`: a bundle that names
    another build than the one that ran leaves the running one's digest there."""
    declared = experiment.document["server"].get("binary_sha256")
    libraries = experiment.document.get("runtime_libraries")
    if not isinstance(declared, str) or not isinstance(libraries, list):
        return
    names = {
        _program(server.argv[0]).casefold()
        for condition in experiment.conditions
        for server in condition.servers
        if server.argv
    }
    for index, library in enumerate(libraries):
        name = library.get("name") if isinstance(library, dict) else None
        # as the maps may write it: another case (a case-insensitive file system), a file
        # replaced on disk while it ran (` (deleted)`)
        if not isinstance(name, str) or _mapped_name(name) not in names:
            continue
        mapped = library.get("sha256")
        if mapped != declared:
            yield _error(
                f"the process maps recorded {name} with another digest than the declared "
                "server binary: the build that ran is not the one declared",
                pointer=f"/runtime_libraries/{index}/sha256", expected=declared,
                actual=str(mapped),
            )  # fmt: skip


def _mapped_name(name: str) -> str:
    return name.removesuffix(" (deleted)").strip().casefold()


# How far a server's clock may seem to move against the capture's, between two answers
# (`created` is whole seconds, and the server may run on another machine than the capture).
_CREATED_SLACK_S = 2.0


def _answers_in_time(ctx: BundleContext) -> Iterator[Finding]:
    """Each answer's `created` (the server's clock, whole seconds, written while it answered)
    lies in its request's time (the capture's clock) plus one offset between the two clocks,
    the same for every answer. No such offset means an answer was not given to its request
    when the record says (an answer of another run, or one moved in time). Only for a
    server known to write `created` so (`ServerProfile.created_when_answered`)."""
    profile = ctx.profile
    if profile is None or not profile.created_when_answered:
        return
    low: tuple[float, str] | None = None  # the least offset each answer allows, the largest
    high: tuple[float, str] | None = None  # the most each allows, the least
    for record in ctx.records:
        if record.http_status != 200:
            continue
        created = record.response_value("/created")
        if type(created) is not int or not 10**9 <= created < 10**11:  # seconds, this century
            yield _error(
                "an answer without its time: the server writes response.created, whole "
                "seconds of its clock, in every answer",
                file=record.file, pointer="/response/created",
                actual="absent" if created is None else repr(created),
            )  # fmt: skip
            continue
        when = _time(record.started_at)
        elapsed = record.elapsed_s
        if (
            when is None
            or isinstance(elapsed, bool)
            or not isinstance(elapsed, int | float)
            or not 0 <= elapsed < 10**7
        ):
            continue
        start = when.timestamp()
        least, most = created - start - elapsed, created + 1 - start
        if low is None or least > low[0]:
            low = (least, record.file)
        if high is None or most < high[0]:
            high = (most, record.file)
    if low is not None and high is not None and low[0] - high[0] > 2 * _CREATED_SLACK_S:
        yield _error(
            f"the answers' times (response.created) do not follow their requests' times: "
            f"between {high[1]} and {low[1]} the server's clock would have moved "
            f"{low[0] - high[0]:.0f} s against the capture's; they are not the answers of "
            "these requests as recorded",
            file=low[1], pointer="/response/created",
        )  # fmt: skip


_TIMINGS_MS = ("/timings/prompt_ms", "/timings/predicted_ms")
_MOST_MS = 1e12  # (NaN and the infinite are not numbers of time either)


def _server_seconds(record: Record) -> tuple[float | None, list[str]]:
    """The seconds the server says it spent reading the prompt and writing the reply
    (llama.cpp's `timings`: prompt_ms + predicted_ms), where it says so; and the pointers
    of those that are there but no number of milliseconds: not a number ("19.4", true), or
    below 0, or 1e12 or more (1e308 would make a request that ran a moment last for ages).
    A timing that is there and not read would skip the bounds it enters (the work against
    the request's duration, and the request's end), so it is an error, never a timing
    left unsaid. One that is not there (or null) says nothing: `telemetry._lacking_in_some`
    holds every answer of a build to carry it where the others do."""
    response = record.response
    if not isinstance(response, dict) or not isinstance(response.get("timings"), dict):
        return None, []  # (most servers': no timings)
    total: float | None = 0.0
    out: list[str] = []
    for pointer in _TIMINGS_MS:
        value = record.response_value(pointer)
        if value is None:
            total = None
        elif (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value < _MOST_MS  # (NaN fails it too)
        ):
            out.append(pointer)
            total = None
        elif total is not None:
            total += value
    return (None if total is None else total / 1000), out


def _before(stop: datetime, start: datetime, lasted: float) -> bool:
    """Whether `stop` came less than `lasted` seconds after `start`."""
    return (stop - start).total_seconds() < lasted


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


_CLOCK_SLACK_S = 0.05
_CLOCK_DRIFT = 0.001


def _one_server_at_a_time(experiment: Experiment) -> Iterator[Finding]:
    """The protocol starts each server once the one before it stopped: two alive at once
    (on one port) would make a restart no restart."""
    lives = []
    for ci, condition in enumerate(experiment.conditions):
        for si, server in enumerate(condition.servers):
            start, stop = _time(server.started_at), _time(server.stopped_at)
            if start is not None:
                lives.append((start, stop, ci, si, condition.id, server.instance))
            else:  # capture has written one since schema 1.0 (both legacy samples have it)
                yield _error(
                    f"server {server.instance} of {condition.id} has no start time with a time "
                    "zone: whether it ran alone, and its requests inside its life, cannot be "
                    "checked",
                    pointer=json_pointer("conditions", ci, "servers", si, "started_at"),
                    actual=str(server.started_at),
                )  # fmt: skip
    lives.sort(key=lambda life: life[0])
    slack = timedelta(seconds=_CLOCK_SLACK_S)
    for before, after in itertools.pairwise(lives):
        if before[1] is None:
            yield _error(
                f"server {before[5]} of {before[4]} has no stop time, yet server {after[5]} "
                f"of {after[4]} started after it: whether it had stopped cannot be checked",
                pointer=json_pointer("conditions", before[2], "servers", before[3], "stopped_at"),
            )  # fmt: skip
        elif before[1] - after[0] > slack:
            yield _error(
                f"server {after[5]} of {after[4]} started before server {before[5]} of "
                f"{before[4]} stopped: two servers alive at once, where the protocol runs one",
                pointer=json_pointer("conditions", after[2], "servers", after[3], "started_at"),
            )  # fmt: skip
    # The last server's stop time too: capture has written every server it started one
    # since schema 1.0 (both legacy samples have them: a 1.0 label lifts no rule), and
    # without it no answer can be placed inside that server's life.
    if lives and lives[-1][1] is None and not experiment.attached:
        last = lives[-1]
        yield _error(
            f"server {last[5]} of {last[4]} has no stop time with a time zone: whether its "
            "requests were answered while it ran cannot be checked",
            pointer=json_pointer("conditions", last[2], "servers", last[3], "stopped_at"),
        )  # fmt: skip


def _one_model(ctx: BundleContext) -> Iterator[Finding]:
    """One experiment runs one model: every answer names the same one. The model most
    answers name is the experiment's; each other one, and an answer that names none where
    the others name one, is an error at the first record that has it. Replies of two models
    compared are not a cache's doing."""
    files: dict[str | None, list[str]] = {}  # the model an answer names -> its records
    for record in ctx.records:
        if record.http_status != 200 or not isinstance(record.response, dict):
            continue  # an error's body need not name one
        model = record.response.get("model")
        files.setdefault(model if isinstance(model, str) else None, []).append(record.file)
    named = {model: where for model, where in files.items() if model is not None}
    if not named:
        return
    most = max(named, key=lambda model: len(named[model]))  # the first of the largest
    for model, where in files.items():
        if model == most:
            continue
        what = "name no model" if model is None else "name another model"
        yield _error(
            f"{len(where)} answer(s) {what} than the {len(named[most])} that name the "
            f"experiment's (the first: {named[most][0]}): one experiment runs one model",
            file=where[0], pointer="/response/model", expected=most,
            actual=model if model is not None else "none",
        )  # fmt: skip


def _one_request_per_record(ctx: BundleContext, experiment: Experiment) -> Iterator[Finding]:
    seen: dict[str, str] = {}
    for record in ctx.records:
        response_id = record.response_value("/id")
        if isinstance(response_id, str) and response_id:
            if response_id in seen:
                yield _error(
                    f"the same response id as {seen[response_id]}: one answer recorded twice",
                    file=record.file, pointer="/response/id",
                )  # fmt: skip
            else:
                seen[response_id] = record.file
    by_condition: dict[str, list[Record]] = {}
    for record in ctx.records:
        by_condition.setdefault(record.condition, []).append(record)
    for condition in experiment.conditions:
        records = sorted(by_condition.get(condition.id, ()), key=lambda r: r.sequence)
        last: datetime | None = None
        # When the request before started, how long (at least) it ran, and its file. Times
        # are compared by their difference: no datetime past the year 9999 is ever built.
        ended: tuple[datetime, float, str] | None = None
        for record in records:
            when = _time(record.started_at)
            if when is None:  # capture has written one since 1.0: a label lifts no rule
                yield _error(
                    "the record has no start time with a time zone: its order cannot be "
                    "checked",
                    file=record.file, pointer="/started_at", actual=str(record.started_at),
                )  # fmt: skip
                continue
            if last is not None and when < last:
                yield _error(
                    "this request started before the one before it: records out of order",
                    file=record.file, pointer="/started_at",
                )  # fmt: skip
            elif ended is not None and (when - ended[0]).total_seconds() < ended[1]:
                yield _error(
                    f"this request started before the one before it ({ended[2]}) had its "
                    "answer: two requests in flight at once, where the protocol sends one at "
                    "a time",
                    file=record.file, pointer="/started_at", actual=record.started_at,
                )  # fmt: skip
            last = when
            raw_elapsed = record.elapsed_s
            elapsed = (
                float(raw_elapsed)
                if isinstance(raw_elapsed, int | float) and not isinstance(raw_elapsed, bool)
                else 0.0
            )
            if elapsed <= 0:
                yield _error(  # capture has timed every request since schema 1.1
                    "the record has no duration (elapsed_s): whether the next request waited "
                    "for its answer cannot be checked",
                    file=record.file, pointer="/elapsed_s", actual=str(raw_elapsed),
                )  # fmt: skip
            worked, out_of_time = _server_seconds(record)
            for pointer in out_of_time:
                yield _error(
                    "the server's timings say it spent "
                    f"{repr(record.response_value(pointer))[:40]} ms on this request "
                    f"({pointer[1:].replace('/', '.')}): not a number of milliseconds in "
                    f"0..{_MOST_MS:.0e}, so its work cannot be read against the request's time",
                    file=record.file, pointer=f"/response{pointer}",
                )  # fmt: skip
            if worked is not None and elapsed > 0 and worked > elapsed * (1 + _CLOCK_DRIFT):
                yield _error(
                    f"the server says it worked {worked:.6g} s on this request (timings), "
                    f"longer than the whole request took ({elapsed:.6g} s, elapsed_s)",
                    file=record.file, pointer="/response/timings", actual=str(raw_elapsed),
                )  # fmt: skip
            if elapsed > 0:
                # Less the clocks' leeway: the start is wall time, the duration monotonic
                # (a slewing wall clock drifts by up to 0.05%). The server's own timings,
                # where it reports them, are work done inside the request: it lasted at
                # least that long whatever the leeway of the client's clocks.
                slack = _CLOCK_SLACK_S + elapsed * _CLOCK_DRIFT
                least = max(elapsed - slack, (worked or 0.0) * (1 - _CLOCK_DRIFT))
                ended = (when, max(0.0, least), record.file)
            else:
                ended = None
            server = condition.server(record.server_instance)
            if server is None:
                continue
            start, stop = _time(server.started_at), _time(server.stopped_at)
            if (start is not None and when < start) or (stop is not None and when > stop):
                yield _error(
                    f"this request started outside the life of server {server.instance} "
                    f"({server.started_at} to {server.stopped_at})",
                    file=record.file, pointer="/started_at", actual=record.started_at,
                )  # fmt: skip
            elif ended is not None and stop is not None and _before(stop, when, ended[1]):
                yield _error(
                    f"this request's answer came after server {server.instance} stopped "
                    f"({server.stopped_at}): a stopped server answers nothing",
                    file=record.file, pointer="/elapsed_s", actual=str(raw_elapsed),
                )  # fmt: skip
