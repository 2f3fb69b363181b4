"""SGLang's server, launched as `PYTHON -m sglang.launch_server` (SERVERS.md; not run here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from verifier.profiles.base import LaunchSpec, ResetCall, ServerLimits, ServerProfile
from verifier.profiles.rules import CacheSignals, ProfileRules, ResetProof


class SglangProfile(ServerProfile):
    @property
    def model_options(self) -> tuple[str, ...]:
        return ("--model-path", "--model")

    def start_argv(self, spec: LaunchSpec) -> list[str]:
        argv = [str(spec.binary), "-m", "sglang.launch_server"]
        argv += ["--model-path", str(self.model_argument(spec.model))]
        argv += ["--served-model-name", spec.alias, "--host", "127.0.0.1", "--port", str(spec.port)]
        argv += ["--enable-metrics", "--enable-cache-report"]
        if spec.cache_disabled:
            argv.append(CACHE_OFF_FLAG)
        return argv + list(spec.extra_args)

    @property
    def switches(self) -> Mapping[str, tuple[str, ...]]:
        # OpenAI-style cached_tokens only with --enable-cache-report, /metrics only with
        # --enable-metrics (SERVERS.md)
        return {"metrics": ("--enable-metrics",), "cached_tokens": ("--enable-cache-report",)}

    @property
    def lazy_counters(self) -> tuple[str, ...]:
        # its collector increments its counter of cached tokens, labelled, only for a
        # request with cached tokens (`if cached_tokens > 0: ...labels(...).inc(...)`,
        # metrics/collector.py): a fresh server's cold requests, and a cache-off server's
        # every one, are served before it exists
        return ("metric:sglang:cached_tokens_total",)

    @property
    def counted_work(self) -> tuple[tuple[str, str], ...]:
        # its prompt counter (SERVERS.md), of which SERVERS.md does not say whether it counts
        # the cached tokens: only the bound both readings meet is read (its generation
        # counter is not in SERVERS.md: not read)
        return (("metric:sglang:prompt_tokens_total", "prompt"),)

    def limits(self, argv: Sequence[str], environment: Mapping[str, str]) -> ServerLimits:
        """SGLang's `--context-length` bounds a prompt and its reply; its
        `--preferred-sampling-params` may cap every reply (`max_new_tokens`); a `--config`
        file may set either."""
        unread = [where for where, _ in self.option_values(argv, environment, _CONFIG_FILE)]
        caps = self.json_caps_given(argv, environment, _PREFERRED, _CAP_KEYS, unread)
        contexts = self.counts_given(argv, environment, _CONTEXT, unread)
        return ServerLimits.read(caps, contexts, unread)


CACHE_OFF_FLAG = "--disable-radix-cache"
_CONFIG_FILE = frozenset(("--config",))
_PREFERRED = frozenset(("--preferred-sampling-params",))
_CAP_KEYS = frozenset(("max_new_tokens",))
_CONTEXT = frozenset(("--context-length",))

RULES = ProfileRules(
    server_name="sglang",
    toggle_prefixes=("SGLANG_", "SGL_"),
    name="sglang",
    version="1",
    signals=CacheSignals(reuse=("metric:sglang:cached_tokens_total",)),
    # /flush_cache refuses while requests run and says nothing of the result.
    reset_proof=ResetProof.NEXT_COLD_REQUEST,
    cache_off_args=(CACHE_OFF_FLAG,),
    logprobs_top_k=5,  # OpenAI-style logprobs + top_logprobs on /v1/chat/completions
    opt_out_fields=None,
)

PROFILE = SglangProfile(
    reset=ResetCall("POST", "/flush_cache"),
    rules=RULES,
    opt_out_missing_reason="SGLang has no per-request radix-cache opt-out",
    block_size=1,
)
