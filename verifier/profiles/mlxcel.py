"""mlxcel-server, the server of the seed report (SERVERS.md)."""

from __future__ import annotations

from collections.abc import Mapping

from verifier.profiles.base import LaunchSpec, ResetCall, ServerProfile
from verifier.profiles.rules import CacheSignals, ProfileRules, ResetProof


class MlxcelProfile(ServerProfile):
    @property
    def model_options(self) -> tuple[str, ...]:
        return ("-m", "--model")

    def start_argv(self, spec: LaunchSpec) -> list[str]:
        argv = [str(spec.binary), "-m", str(self.model_argument(spec.model))]
        argv += ["--alias", spec.alias, "--host", "127.0.0.1", "--port", str(spec.port)]
        argv += ["--parallel", str(self.parallelism), "--metrics", "--no-warmup"]
        if spec.cache_disabled:
            argv.append(CACHE_OFF_FLAG)
        return argv + list(spec.extra_args)

    @property
    def other_hit_counters(self) -> tuple[str, ...]:
        # the snapshot cache of model-owned state (SERVERS.md, additions): its own counters
        return (
            "metric:mlxcel_prompt_cache_snapshot_hits_total",
            "metric:mlxcel_prompt_cache_snapshot_tokens_reused_total",
            "stats:snapshot_hits",  # (and in /v1/cache/stats: `snapshot_*`)
            "stats:snapshot_tokens_reused",
        )

    @property
    def switches(self) -> Mapping[str, tuple[str, ...]]:
        return {"metrics": ("--metrics",)}  # /metrics answers 501 without it (SERVERS.md)

    @property
    def cached_tokens_counter(self) -> str | None:
        # in the seed sample it moves by each answer's cached_tokens, 0 or 32 (SERVERS.md)
        return "metric:llamacpp:prompt_tokens_cached_total"

    @property
    def counted_work(self) -> tuple[tuple[str, str], ...]:
        # SERVERS.md lists llama.cpp's prompt counter in mlxcel's /metrics; llama.cpp's
        # leaves the cached tokens out, the seed sample's counts them (42 on each warm
        # request, 32 of them cached): only the bound both readings meet is read
        return (("metric:llamacpp:prompt_tokens_total", "prompt"),)

    def toggle_options(self, toggle: str) -> tuple[str, ...]:
        """MLXCEL_PREFILL_CHUNK is also `--prefill-chunk-size` (SERVERS.md)."""
        return _TOGGLE_OPTIONS.get(toggle, ())


_TOGGLE_OPTIONS = {"MLXCEL_PREFILL_CHUNK": ("--prefill-chunk-size",)}


CACHE_OFF_FLAG = "--no-prompt-cache"

RULES = ProfileRules(
    server_name="mlxcel-server",
    toggle_prefixes=("MLXCEL_", "MLX_", "APC_", "RUST_LOG"),
    has_stats=True,
    name="mlxcel",
    version="1",
    signals=CacheSignals(
        # A paged-pool hit moves the scheduler's hit counter and the store's hit count alike.
        hits=("metric:mlxcel_prompt_cache_hits_total", "stats:hits"),
        reuse=("metric:mlxcel_prompt_cache_prefix_tokens_reused_total",),
        # Store lookups and inserts exist only in /v1/cache/stats (SERVERS.md).
        lookups=("stats:lookups",),
        inserts=("stats:inserts",),
        paths=("metric:mlxcel_paged_decode_launches_total",),
        # The scheduler's misses (SERVERS.md): the seed capture's cold requests move it by
        # one, its warm ones never; a warm request that moves it shows a miss, not a hit.
        misses=("metric:mlxcel_prompt_cache_misses_total",),
    ),
    # /v1/cache/reset says cleared:true even when nothing was there: the stats prove it.
    reset_proof=ResetProof.STATS_ENTRIES,
    cache_off_args=(CACHE_OFF_FLAG,),
    logprobs_top_k=5,  # OpenAI-style logprobs + top_logprobs on /v1/chat/completions
    cache_enabled_pointer="/enabled",
    cache_entries_pointer="/entries",
    opt_out_fields={"cache_prompt": False},
    # reject_{oversized, disabled, prefix_too_short, ...} and last_reject_reason (SERVERS.md).
    miss_reason_prefix="reject_",
    last_miss_reason_pointer="/last_reject_reason",
)

PROFILE = MlxcelProfile(
    reset=ResetCall("POST", "/v1/cache/reset"),
    rules=RULES,
    stats_path="/v1/cache/stats",
    parallelism=4,
    block_size_pointer="/paged_block_size",
)
