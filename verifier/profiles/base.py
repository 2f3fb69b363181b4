"""One server's profile: how capture starts and drives it, and the rules verify judges by."""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifier.errors import UsageError
from verifier.profiles.rules import ProfileRules, ResetProof


@dataclass(frozen=True)
class ResetCall:
    """The HTTP call that clears the prefix cache."""

    method: str
    path: str


# A count as a server's parser would read the whole of it (llama-server's own reads `22x` as 22).
_INTEGER = re.compile(r"-?[0-9]{1,18}")


@dataclass(frozen=True)
class ServerLimits:
    """What one server's command line and environment set for every request it serves, where
    a request's own fields cannot undo it (llama-server's `-n` lowers each request's cap to
    its own; its `--samplers` list stands where a request names none).

    A limit given in a form not read as a count (`-n 22x`) counts as one every reply met.
    """

    reply_cap: int | None = None  # the most tokens a reply may have
    context: int | None = None  # the tokens a prompt and its reply share in one slot
    unread: str | None = None  # a limit not read as a count, as written
    sampling: str | None = None  # a setting by which a request at temperature 0 still samples

    @classmethod
    def read(
        cls, caps: list[int], contexts: list[int], unread: list[str], sampling: str | None = None
    ) -> ServerLimits:
        """The limits of the values a server was given: the least cap, the least context
        (0: the model's own, none known), the places not read as counts."""
        return cls(
            reply_cap=min(caps, default=None),
            context=min((c for c in contexts if c > 0), default=None),
            unread=", ".join(unread) or None,
            sampling=sampling,
        )

    def capped(self, prompt: int | None, used: int | None) -> bool:
        """Whether a reply of `used` tokens after a prompt of `prompt` may have been cut by
        these limits (unknown counts: it may)."""
        if self.unread is not None:
            return True
        if self.reply_cap is not None and (used is None or used >= self.reply_cap):
            return True
        return self.context is not None and (
            used is None or prompt is None or prompt + used >= self.context
        )


@dataclass(frozen=True)
class LaunchSpec:
    """Everything a profile needs to build one server's command line."""

    binary: Path
    model: Path
    alias: str
    port: int
    cache_disabled: bool
    scratch_dir: Path
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServerProfile(ABC):
    """One server's facts. Capture and verify read these; neither branches on `name`.

    A server's subclass adds methods, never fields, so it is a plain subclass: it keeps
    these generated methods (a @dataclass on each would generate them again, about 0.5 ms
    of every start-up each), and its fields stay frozen.
    """

    reset: ResetCall
    rules: ProfileRules
    chat_path: str = "/v1/chat/completions"
    readiness_path: str = "/health"
    stats_path: str | None = None
    metrics_path: str | None = "/metrics"
    opt_out_missing_reason: str = "the server has no per-request cache opt-out"
    pinned_request_fields: Mapping[str, Any] = field(default_factory=dict)
    extra_env: Mapping[str, str] = field(default_factory=dict)
    parallelism: int | None = None
    block_size: int | None = None
    block_size_pointer: str | None = None  # into the stats document, when it says

    @property
    def name(self) -> str:
        return self.rules.name

    @property
    def server_name(self) -> str:
        return self.rules.server_name or self.rules.name

    @property
    def experiment_env_prefixes(self) -> tuple[str, ...]:
        return self.rules.toggle_prefixes

    @property
    def version(self) -> str:
        return self.rules.version

    @property
    def opt_out_fields(self) -> Mapping[str, Any] | None:
        return self.rules.opt_out_fields

    @property
    def can_disable_cache(self) -> bool:
        return self.rules.can_disable_cache

    @property
    def reset_proof(self) -> ResetProof:
        return self.rules.reset_proof

    @abstractmethod
    def start_argv(self, spec: LaunchSpec) -> list[str]:
        """The server's command line, with the cache on or off as `spec` says."""

    def model_argument(self, model: Path) -> Path:
        """The path the server is given: the model directory or file as is, by default."""
        return model

    def spellings(self, option: str) -> tuple[str, ...]:
        """Every spelling of a command-line option (`--flash-attn`, `-fa`), itself first."""
        return (option,)

    @property
    def long_options_read_with_underscores(self) -> bool:
        """Whether the server's parser reads `_` in a long option's name as `-`
        (llama-server's common/arg.cpp does, for every `--` option; so does vLLM's
        FlexibleArgumentParser): then `--flash_attn on` is `--flash-attn on` (none known,
        by default)."""
        return False

    def option_name(self, arg: str) -> str:
        """The option a command-line argument gives, as the server's parser reads it: the
        part before `=`, a long option's `_` read as `-` where the parser does so
        (`long_options_read_with_underscores`)."""
        option = arg.partition("=")[0]
        if option.startswith("--") and self.long_options_read_with_underscores:
            return option.replace("_", "-")
        return option

    def models_named(
        self, argv: Sequence[str], environment: Mapping[str, str]
    ) -> Iterator[tuple[str, str]]:
        """Each place the server is told which model to load, as (where, value): the
        values of `model_options` (`option_values`), and where the server takes its model
        as a positional argument (`vllm serve MODEL`), that argument too."""
        return self.option_values(argv, environment, self.model_options)

    @property
    def lazy_counters(self) -> tuple[str, ...]:
        """The cache counters the server creates on first use, not at its start (labelled
        Prometheus counters a server first increments where it has something to count):
        absent before that from a snapshot whose metrics were read, one stands at zero
        (`proofs.lazy_until`; none known, by default)."""
        return ()

    @property
    def omits_no_cached_tokens(self) -> bool:
        """Whether the server, started to report cached tokens (`switches`'s
        `cached_tokens`), leaves the count out of an answer where it is zero rather than
        writing 0 (`proofs.prove_request` reads it as 0 there only where the profile's
        counters of reuse were read and stood still; none known, by default)."""
        return False

    def toggle_options(self, toggle: str) -> tuple[str, ...]:
        """The command-line options that set what the environment toggle `toggle` sets: given
        beside it, they decide what the server ran with (none known, by default)."""
        return ()

    def option_values(
        self, argv: Sequence[str], environment: Mapping[str, str], options: Collection[str]
    ) -> Iterator[tuple[str, str]]:
        """Each value a server is given for one of `options` (every spelling, as
        `spellings` gives them), as (where, value): `--opt=value` or `--opt value` on its
        command line, and the environment variables that set the option (`toggle_options`:
        `LLAMA_ARG_MODEL` is llama-server's `--model`). A long option may be written with `_`
        for `-` (`--model_url`: llama-server and vLLM read it as `--model-url`)."""
        for index, arg in enumerate(argv):
            option, eq, value = arg.partition("=")
            if option.startswith("--"):
                option = option.replace("_", "-")
            if option in options and eq:
                yield arg, value
            elif option in options and not eq and index + 1 < len(argv):
                yield f"{arg} {argv[index + 1]}", argv[index + 1]
        for name, value in environment.items():
            if any(o in options for o in self.toggle_options(name)):
                yield f"{name}={value}", value

    def limits(self, argv: Sequence[str], environment: Mapping[str, str]) -> ServerLimits:
        """What a server's command line and environment set for every request it serves
        (`ServerLimits`; none known, by default)."""
        return ServerLimits()

    def counts_given(
        self,
        argv: Sequence[str],
        environment: Mapping[str, str],
        options: Collection[str],
        unread: list[str],
    ) -> list[int]:
        """The values given for `options` that are counts as the server's parser would read
        the whole of them (`-?[0-9]+`); each other value's place is added to `unread`."""
        found = []
        for where, value in self.option_values(argv, environment, options):
            if _INTEGER.fullmatch(value) is None:
                unread.append(where)
            else:
                found.append(int(value))
        return found

    def json_caps_given(
        self,
        argv: Sequence[str],
        environment: Mapping[str, str],
        options: Collection[str],
        keys: Collection[str],
        unread: list[str],
    ) -> list[int]:
        """The reply caps (`keys`) in JSON objects given for `options` (vLLM's
        `--override-generation-config '{"max_new_tokens": 22}'`); a value that is not such an
        object, or a cap that is not a count, is added to `unread`."""
        found = []
        for where, value in self.option_values(argv, environment, options):
            try:
                document = json.loads(value)
            except (ValueError, RecursionError):
                document = None
            if not isinstance(document, dict):
                unread.append(where)
                continue
            for key in keys & document.keys():
                cap = document[key]
                if type(cap) is int and cap >= 0:
                    found.append(cap)
                elif cap is not None:
                    unread.append(where)
        return found

    @property
    def model_options(self) -> tuple[str, ...]:
        """The options whose value is the model the server loads (or where it loads it from):
        a command line the harness wrote gives one of them once, or (where the model is a
        positional argument, as `vllm serve MODEL`) none."""
        return ("--model",)

    @property
    def model_is_file(self) -> bool:
        """Whether the model option's value is always one file (llama-server's GGUF): then
        its name is the declared `model_file`, whatever its suffix; otherwise only a name
        with a model file's suffix is compared (a folder's name is not a file's)."""
        return False

    @property
    def created_when_answered(self) -> bool:
        """Whether the server writes each answer's `created` from its clock as it answers
        (seen for llama-server; not known of the others, whose samples do not show it)."""
        return False

    @property
    def cached_tokens_counter(self) -> str | None:
        """A counter of prompt tokens served from the cache that is not one of the rules'
        signals (mlxcel's llama.cpp-style `llamacpp:prompt_tokens_cached_total`): it must
        not rise across an answer that says no token came from the cache."""
        return None

    @property
    def cache_on_args(self) -> tuple[str, ...]:
        """What the harness writes in a cache-on server's command line to say so, where the
        server has such a flag (vLLM's `--enable-prefix-caching`): with the cache-off flag,
        the one difference allowed between an experiment's command lines (none, by default)."""
        return ()

    def cache_state_in_metrics(self, metrics: Mapping[str, float]) -> frozenset[bool]:
        """What the server's own metrics say of its prefix cache: {True} on, {False} off,
        both where samples disagree, none where they do not say (none known, by default)."""
        return frozenset()

    @property
    def other_hit_counters(self) -> tuple[str, ...]:
        """Counters of a cache beside the one the rules' signals count (mlxcel's snapshot
        cache of model-owned state), or of the same cache beside them, where older builds
        lack them (vLLM's `vllm:prompt_tokens_cached`): a rise across a request that claims
        the cache was not used (cold, opt-out, cache-off) says it was, and leaves the
        request unproven. `metric:FAMILY{label="value"}` (or `!=`) reads only the samples
        of that label value (or of any other). Not in ProfileRules: the rule copies that
        bundles carry stay valid (none known, by default)."""
        return ()

    @property
    def reuse_within_lookups(self) -> bool:
        """Whether the rules' reuse and lookup counters count the same thing (vLLM's prefix
        cache hits and queries, both in tokens: SERVERS.md), so that across a request the
        reuse rises no more than the lookups (not so by default: mlxcel counts reused
        tokens and lookups of entries)."""
        return False

    @property
    def says_cache_state_in_metrics(self) -> bool:
        """Whether `cache_state_in_metrics` can say anything (a check skips it otherwise)."""
        return False

    @property
    def decode_counter(self) -> str | None:
        """A counter of the server's decode calls (llama-server's `llamacpp:n_decode_total`):
        each call reads at least one prompt token or yields one generated token, so across a
        request it moves by at most the prompt tokens computed plus the completion tokens
        less one (the last token is never decoded). None known by default."""
        return None

    @property
    def switches(self) -> Mapping[str, tuple[str, ...]]:
        """Evidence the server gives only where it was started to, by what (`metrics`: its
        /metrics readings; `cached_tokens`: the cached_tokens of its answers): the flags,
        and the environment variables (names without a leading `-`), any one of which turns
        it on. Records that hold such evidence from a server whose declared command line
        and environment ask for none of them are a warning: the evidence may not be that
        server's (none known, by default: given always). Not in ProfileRules: the rule
        copies that bundles carry stay valid."""
        return {}

    @property
    def work_counters(self) -> tuple[str, ...]:
        """Counters of the work a server did (tokens read and written), cache or no cache: a
        server started by the harness starts them at zero, and only the recorded requests
        move them (none known, by default). Not in ProfileRules: the rule copies that
        bundles carry stay valid."""
        return ()

    @property
    def seconds_counters(self) -> tuple[tuple[str, str], ...]:
        """Counters of the seconds a server spent on its requests' work (llama-server's
        `llamacpp:prompt_seconds_total`, `llamacpp:tokens_predicted_seconds_total`), each
        with the field of an answer that counts the same time in milliseconds
        (`/timings/prompt_ms`, `/timings/predicted_ms`): a server started by the harness
        starts them at zero, only the recorded requests move them, across one they move by
        what its answer's field says, and never by more than the request took (none known,
        by default). Not in ProfileRules: the rule copies that bundles carry stay valid."""
        return ()

    @property
    def busy_gauges(self) -> tuple[str, ...]:
        """Gauges of the requests a server is serving or holding back, worked out as a
        snapshot is read (llama-server's `llamacpp:requests_processing` and
        `llamacpp:requests_deferred`: its slots and queue then): requests are serialized,
        so each snapshot, taken before or after a request with none in flight, reads 0 in
        every one. Not a gauge a server updates as it works (vLLM's `num_requests_running`
        can still read 1 once a request is answered). Not in ProfileRules: the rule copies
        that bundles carry stay valid (none known, by default)."""
        return ()

    def version_commit(self, version: str) -> str | None:
        """The commit the server's own version text (`--version`) names, if it names one
        (none known, by default)."""
        return None

    def cached_tokens_from_elsewhere(self, argv: Sequence[str]) -> bool:
        """Whether the server this command line starts counts in an answer's cached_tokens
        tokens its own cache did not supply (vLLM's with a KV connector, which loads them
        from another tier): its counted work is then not compared with the answers (none
        known, by default)."""
        return False

    @property
    def counted_work(self) -> tuple[tuple[str, str], ...]:
        """Counters that a request alone on the server moves by what its answer counts, as
        (counter, what it counts). Exactly: `computed`, the prompt tokens computed
        (prompt_tokens - cached_tokens); `completion`, usage.completion_tokens; `cached`,
        cached_tokens. Within bounds, where SERVERS.md names what the counter counts but
        not all of how: `prompt`, prompt tokens with or without the cached ones (at most
        prompt_tokens); `looked_up`, the prompt tokens looked up in the cache (from
        cached_tokens to prompt_tokens: none where the request did not reach it). A move
        past the most is other work beside the request, which nobody recorded; one short
        of the least is an answer the server did not give.
        Not in ProfileRules: the rule copies that bundles carry stay valid. None known by
        default."""
        return ()


def single_file_in(model: Path, suffix: str) -> Path:
    """A file model as is; a directory holding exactly one `*suffix` file, that file."""
    if model.is_file():
        return model
    candidates = sorted(model.glob(f"*{suffix}"))
    if len(candidates) != 1:
        raise UsageError(
            f"{model} holds {len(candidates)} {suffix} files; give --model the one file to serve"
        )
    return candidates[0]
