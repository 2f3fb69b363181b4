"""SGLang's server, launched as `PYTHON -m sglang.launch_server` (SERVERS.md; not run here)."""

from __future__ import annotations

from dataclasses import dataclass

from verifier.capture.profiles.base import LaunchSpec, ResetCall, ServerProfile, TelemetryMap


@dataclass(frozen=True)
class SglangProfile(ServerProfile):
    def start_argv(self, spec: LaunchSpec) -> list[str]:
        argv = [str(spec.binary), "-m", "sglang.launch_server"]
        argv += ["--model-path", str(self.model_argument(spec.model))]
        argv += ["--served-model-name", spec.alias, "--host", "127.0.0.1", "--port", str(spec.port)]
        argv += ["--enable-metrics", "--enable-cache-report"]
        if spec.cache_disabled:
            argv.append("--disable-radix-cache")
        return argv + list(spec.extra_args)


PROFILE = SglangProfile(
    name="sglang",
    server_name="sglang",
    experiment_env_prefixes=("SGLANG_", "SGL_"),
    reset=ResetCall("POST", "/flush_cache"),
    opt_out_missing_reason="SGLang has no per-request radix-cache opt-out",
    telemetry=TelemetryMap(reuse_counters=("metric:sglang:cached_tokens_total",)),
    block_size=1,
)
