"""mlxcel-server, the server of the seed report (SERVERS.md)."""

from __future__ import annotations

from dataclasses import dataclass

from verifier.capture.profiles.base import LaunchSpec, ResetCall, ServerProfile, TelemetryMap


@dataclass(frozen=True)
class MlxcelProfile(ServerProfile):
    def start_argv(self, spec: LaunchSpec) -> list[str]:
        argv = [str(spec.binary), "-m", str(self.model_argument(spec.model))]
        argv += ["--alias", spec.alias, "--host", "127.0.0.1", "--port", str(spec.port)]
        argv += ["--parallel", str(self.parallelism), "--metrics", "--no-warmup"]
        if spec.cache_disabled:
            argv.append("--no-prompt-cache")
        return argv + list(spec.extra_args)


PROFILE = MlxcelProfile(
    name="mlxcel",
    server_name="mlxcel-server",
    experiment_env_prefixes=("MLXCEL_", "MLX_", "APC_", "RUST_LOG"),
    reset=ResetCall("POST", "/v1/cache/reset"),
    stats_path="/v1/cache/stats",
    opt_out_fields={"cache_prompt": False},
    telemetry=TelemetryMap(
        hit_counters=("metric:mlxcel_prompt_cache_hits_total",),
        reuse_counters=("metric:mlxcel_prompt_cache_prefix_tokens_reused_total",),
        store_counters=("stats:lookups", "stats:hits", "stats:inserts"),
        path_counters=("metric:mlxcel_paged_decode_launches_total",),
        cache_enabled_pointer="/enabled",
        cache_entries_pointer="/entries",
    ),
    parallelism=4,
    block_size_pointer="/paged_block_size",
)
