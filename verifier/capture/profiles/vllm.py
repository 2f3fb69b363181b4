"""vLLM's OpenAI-compatible server (SERVERS.md; not run here)."""

from __future__ import annotations

from dataclasses import dataclass

from verifier.capture.profiles.base import LaunchSpec, ResetCall, ServerProfile, TelemetryMap


@dataclass(frozen=True)
class VllmProfile(ServerProfile):
    def start_argv(self, spec: LaunchSpec) -> list[str]:
        argv = [str(spec.binary), "serve", str(self.model_argument(spec.model))]
        argv += ["--served-model-name", spec.alias, "--host", "127.0.0.1", "--port", str(spec.port)]
        argv.append("--enable-prompt-tokens-details")
        argv.append(
            "--no-enable-prefix-caching" if spec.cache_disabled else "--enable-prefix-caching"
        )
        return argv + list(spec.extra_args)


PROFILE = VllmProfile(
    name="vllm",
    server_name="vllm",
    experiment_env_prefixes=("VLLM_",),
    reset=ResetCall("POST", "/reset_prefix_cache"),
    # /reset_prefix_cache is mounted only in dev mode.
    extra_env={"VLLM_SERVER_DEV_MODE": "1"},
    opt_out_missing_reason="vLLM has no per-request prefix-cache opt-out",
    telemetry=TelemetryMap(
        reuse_counters=("metric:vllm:prefix_cache_hits_total",),
        store_counters=("metric:vllm:prefix_cache_queries_total",),
    ),
    block_size=16,
)
