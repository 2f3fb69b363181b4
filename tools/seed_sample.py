"""Write a synthetic raw capture shaped like the seed report's mlxcel experiment.

The seed report (shared/seed/000_789ac0e75e1df7f7.txt) publishes only excerpts of the two
stories, so the texts here are stand-ins with the report's shape: a common prefix of 397
code points, then A (cold and disabled arms) and B (warm arm). Telemetry follows the
report: 42 prompt tokens, block size 32, warm hits of 32 cached tokens with +2 hits and
+64 reused tokens, decode launches on the gather path (9,772 per A, 12,572 per B).
The private values (user, host, paths, tokens) are fake and exist so export has
something to remove. Everything is deterministic: the same call writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from verifier.profiles.mlxcel import RULES as MLXCEL_RULES

SCHEMA_VERSION = "1.1"
USER = "alice"
HOST = "gb10-lab-07"
HOME = "/home/alice"
MODEL_DIR = f"{HOME}/models/Qwen3-1.7B-4bit"
BINARY = f"{HOME}/src/mlxcel/target/release/mlxcel-server"
WORKDIR = f"{HOME}/work/cache-repro-2128"
CACHE_DIR = "/tmp/mlxcel-isolated-cache-7f3a"
PORT = 18128
ALIAS = "cache-repro"
START = datetime(2026, 11, 2, 9, 30, 0, tzinfo=UTC)

PROMPT = (
    "Write a short story of about 600 words about a lighthouse keeper who finds a message "
    "in a bottle. Use vivid but plain language. /no_think"
)
REQUEST_BODY: dict[str, Any] = {
    "model": ALIAS,
    "messages": [{"role": "user", "content": PROMPT}],
    "max_tokens": 800,
    "temperature": 0,
    "seed": 0,
    "stream": False,
    "user": "mlxcel-2128-cache-repro",
}

_PREFIX = (
    "It was a cold, gray morning on the cape, and Elias had kept the light for six "
    "years. He knew the sound of every board in the tower and every step on "
    "the iron stairs. He wiped the salt from the lens, wrote the hour in the log, and went "
    "down to the rocks to look at the water, as he did each day. The tide was low. Kelp "
    "lay in ropes on the stones, and a green bottle rolled in the shallow foam near "
)
COMMON_PREFIX = _PREFIX
assert len(COMMON_PREFIX) == 397, len(COMMON_PREFIX)
STORY_A = COMMON_PREFIX + (
    "his boots. The wind began to howl. Elias had been on the deck for hours, sweeping the "
    "sand from the pier, and he almost let the bottle go back to the sea. Inside was a "
    "rolled page, dry, tied with red thread. It said: If you find this, I am still waiting "
    "for the light. He read it twice and put it in his coat."
)
STORY_B = COMMON_PREFIX + (
    "the pier. The wind picked up. Elias was alone in the tower, the only sound the creak "
    "of the old wooden floor, when he carried the bottle up and set it by the lamp. Inside "
    "was a rolled page, dry, tied with red thread. It said: If you find this, look north "
    "at dusk. He read it twice and climbed to the gallery."
)
COMPLETION_TOKENS = {"A": 712, "B": 731}
GATHER_LAUNCHES = {"A": 9772, "B": 12572}

MODEL_FILES = [
    ("added_tokens.json", 707),
    ("config.json", 1123),
    ("merges.txt", 1671853),
    ("model.safetensors", 984006204),
    ("model.safetensors.index.json", 48113),
    ("special_tokens_map.json", 613),
    ("tokenizer.json", 11422654),
    ("tokenizer_config.json", 9732),
    ("vocab.json", 2776833),
]
# The two digests the seed report states; the other files get stand-in digests.
KNOWN_DIGESTS = {
    "model.safetensors": "0e86d9677e519323849eac1bc272caae88567a481ff188c431f70be543d9995f",
    "config.json": "507a6701220524eb8b283425bf0856a9ae4f21f4052e563896ddd668994b1dc7",
}
LIBRARIES = [
    BINARY,
    "/usr/lib/aarch64-linux-gnu/libc.so.6",
    "/usr/lib/aarch64-linux-gnu/libcuda.so.580.178.04",
    "/usr/local/cuda-13.0/targets/sbsa-linux/lib/libcudart.so.13.0.96",
    "/usr/local/cuda-13.0/targets/sbsa-linux/lib/libcublas.so.13.0.2.14",
    f"{HOME}/opt/cudnn-9.13.0/lib/libcudnn.so.9.13.0",
    "/usr/lib/aarch64-linux-gnu/libstdc++.so.6.0.30",
]


def _stand_in_digest(label: str) -> str:
    return hashlib.sha256(f"stand-in:{label}".encode()).hexdigest()


def _ts(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _write(path: Path, document: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


class _Server:
    """The counters of one simulated mlxcel-server process."""

    def __init__(self, cache_enabled: bool) -> None:
        self.cache_enabled = cache_enabled
        self.entries = 0
        self.stats = {"hits": 0, "lookups": 0, "inserts": 0}
        self.metrics = {
            "mlxcel_prompt_cache_hits_total": 0,
            "mlxcel_prompt_cache_misses_total": 0,
            "mlxcel_prompt_cache_prefix_tokens_reused_total": 0,
            'mlxcel_paged_decode_launches_total{path="cascade"}': 0,
            'mlxcel_paged_decode_launches_total{path="fused_v2"}': 0,
            'mlxcel_paged_decode_launches_total{path="gather"}': 0,
            "llamacpp:prompt_tokens_total": 0,
            "llamacpp:prompt_tokens_cached_total": 0,
        }

    def cache_stats(self) -> dict[str, Any]:
        enabled = self.cache_enabled
        lookups = self.stats["lookups"]
        return {
            "enabled": enabled,
            "apc_enabled": enabled,
            "block_size": 32,
            "hash": "xxh3-64",
            "entries": self.entries,
            "bytes": self.entries * 3670016,
            "hits": self.stats["hits"],
            "lookups": lookups,
            "hit_rate": round(self.stats["hits"] / lookups, 4) if lookups else 0.0,
            "inserts": self.stats["inserts"],
            "evictions_lru": 0,
            "evictions_ttl": 0,
            "paged_block_size": 32,
            "paged_blocks_total": 4096,
            "paged_blocks_free": 4096 - self.entries * 2,
        }

    def metrics_text(self) -> str:
        lines = []
        for key, value in self.metrics.items():
            family = key.split("{", 1)[0]
            lines.append(f"# TYPE {family} counter")
            lines.append(f"{key} {value}")
        return "\n".join(lines) + "\n"

    def snapshot(self, at: float) -> dict[str, Any]:
        return {
            "taken_at": _ts(at),
            "cache_stats": self.cache_stats(),
            "cache_stats_status": 200,
            "metrics": {k: float(v) for k, v in sorted(self.metrics.items())},
            "metrics_text": self.metrics_text(),
            "metrics_status": 200,
        }

    def serve(self, arm: str) -> tuple[str, int | None]:
        """Advance the counters as the seed report saw them; return (output class, cached)."""
        self.metrics["llamacpp:prompt_tokens_total"] += 42
        if arm == "warm":
            self.stats["lookups"] += 1
            self.stats["hits"] += 1
            self.metrics["mlxcel_prompt_cache_hits_total"] += 2
            self.metrics["mlxcel_prompt_cache_prefix_tokens_reused_total"] += 64
            self.metrics["llamacpp:prompt_tokens_cached_total"] += 32
            output, cached = "B", 32
        elif arm == "cold":
            self.stats["lookups"] += 1
            self.stats["inserts"] += 1
            self.metrics["mlxcel_prompt_cache_misses_total"] += 1
            self.entries = 1
            output, cached = "A", 0
        elif arm == "request-disabled":
            output, cached = "A", 0
        else:
            output, cached = "A", None
        self.metrics['mlxcel_paged_decode_launches_total{path="gather"}'] += GATHER_LAUNCHES[output]
        return output, cached


def _response(sequence: int, condition: str, output: str, cached: int | None) -> dict[str, Any]:
    completion = COMPLETION_TOKENS[output]
    usage: dict[str, Any] = {
        "prompt_tokens": 42,
        "completion_tokens": completion,
        "total_tokens": 42 + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    request_id = hashlib.sha256(f"{condition}/{sequence}".encode()).hexdigest()[:24]
    return {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": 1793525400 + sequence * 40,
        "model": ALIAS,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": STORY_A if output == "A" else STORY_B},
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }


def _server_env(condition_settings: dict[str, str]) -> dict[str, str]:
    env = {
        "PATH": f"{HOME}/.cargo/bin:/usr/local/cuda-13.0/bin:/usr/bin:/bin",
        "HOME": HOME,
        "USER": USER,
        "LOGNAME": USER,
        "HOSTNAME": HOST,
        "LD_LIBRARY_PATH": f"{HOME}/opt/cudnn-9.13.0/lib:/usr/local/cuda-13.0/lib64",
        "HF_TOKEN": "hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx",
        "SSH_CONNECTION": "192.168.40.23 51234 192.168.40.7 22",
        "MLXCEL_DEVICE": "gpu",
        "MLXCEL_APC_TRACE": "1",
        "MLXCEL_CACHE_DIR": CACHE_DIR,
        "RUST_LOG": "info",
    }
    env.update(condition_settings)
    return dict(sorted(env.items()))


def _server_argv(cache_disabled: bool) -> list[str]:
    argv = [BINARY, "-m", MODEL_DIR, "--alias", ALIAS, "--host", "127.0.0.1"]
    argv += ["--port", str(PORT), "--parallel", "4", "--metrics", "--no-warmup"]
    return [*argv, "--no-prompt-cache"] if cache_disabled else argv


def _server_log(instance: int, cache_disabled: bool) -> str:
    cache = "disabled (--no-prompt-cache)" if cache_disabled else "enabled, block size 32"
    return (
        f"[INFO] mlxcel-server e466f511 starting on {HOST} (instance {instance})\n"
        f"[INFO] loading model from {MODEL_DIR}\n"
        f"[INFO] runtime cache dir {CACHE_DIR}\n"
        f"[INFO] prompt cache {cache}\n"
        f"[INFO] listening on http://127.0.0.1:{PORT}\n"
    )


def _library_entries() -> list[dict[str, Any]]:
    entries = []
    for path in LIBRARIES:
        name = path.rsplit("/", 1)[-1]
        version = name.split(".so.", 1)[1] if ".so." in name else None
        digest = (
            "e9d52181962009218f539569802d5fc2a389fb607d18ffad2b14b2f41dfdc608"
            if path == BINARY
            else _stand_in_digest(name)
        )
        entries.append({"path": path, "version": version, "sha256": digest})
    return entries


def _write_condition(out: Path, condition: str, settings: dict[str, str], clock: float) -> float:
    """Run the five phases of one condition; return the clock after it."""
    plan: list[tuple[str, str, str | None]] = []  # (phase, arm, event before: start/reset)
    plan += [("cycle-1", "cold", "reset"), ("cycle-1", "warm", None), ("cycle-1", "warm", None)]
    plan += [("cycle-2", "cold", "reset"), ("cycle-2", "warm", None), ("cycle-2", "warm", None)]
    plan += [("opt-out", "request-disabled", None)] * 3
    plan += [("restart", "cold", "start"), ("restart", "warm", None)]
    plan += [("disabled-server", "server-disabled", "start" if i == 0 else None) for i in range(3)]

    instance = 1
    server = _Server(cache_enabled=True)
    starts = {1: clock}
    stops: dict[int, float] = {}
    disabled_instances: set[int] = set()
    preceded = "server-start"
    for sequence, (phase, arm, event) in enumerate(plan, start=1):
        reset: dict[str, Any] | None = None
        if event == "start" and sequence > 1:
            stops[instance] = clock
            instance += 1
            clock += 6.5
            starts[instance] = clock
            cache_disabled = arm == "server-disabled"
            if cache_disabled:
                disabled_instances.add(instance)
            server = _Server(cache_enabled=not cache_disabled)
            preceded = "server-start"
        elif event == "reset":
            freed = server.entries
            server.entries = 0
            reset = {
                "status": 200,
                "answer": {"cleared": True, "freed_bytes": freed * 3670016, "freed_entries": freed},
                "proven": True,
                "stats_after": server.cache_stats(),
            }
            preceded = "cache-reset"
        body = dict(REQUEST_BODY)
        if arm == "request-disabled":
            body["cache_prompt"] = False
        before = server.snapshot(clock)
        started = clock
        output, cached = server.serve(arm)
        elapsed = 21.4 if output == "A" else 22.9
        clock += elapsed + 0.3
        exchange = {
            "schema_version": SCHEMA_VERSION,
            "kind": "evidence.raw-exchange",
            "condition": condition,
            "sequence": sequence,
            "phase": phase,
            "server_instance": instance,
            "claimed_arm": arm,
            "preceded_by": preceded,
            "reset": reset,
            "request": {
                "method": "POST",
                "url": f"http://127.0.0.1:{PORT}/v1/chat/completions",
                "body": body,
            },
            "response": {
                "status": 200,
                "headers": {"content-type": "application/json", "server": f"mlxcel ({HOST})"},
                "body": _response(sequence, condition, output, cached),
                "text": None,
                "error": None,
            },
            "timing": {"started_at": _ts(started), "elapsed_s": elapsed},
            "telemetry": {"before": before, "after": server.snapshot(clock)},
        }
        _write(out / f"conditions/{condition}/exchanges/{sequence:03d}.json", exchange)
        preceded = "request"
    stops[instance] = clock

    for number, started_at in starts.items():
        cache_disabled = number in disabled_instances
        log_path = f"{WORKDIR}/raw-{condition}/conditions/{condition}/servers/{number}.log"
        document = {
            "schema_version": SCHEMA_VERSION,
            "kind": "evidence.raw-server",
            "condition": condition,
            "instance": number,
            "cache_disabled": cache_disabled,
            "argv": _server_argv(cache_disabled),
            "env": _server_env(settings),
            "cwd": WORKDIR,
            "pid": 41000 + number * 17 + len(condition),
            "started_at": _ts(started_at),
            "ready_at": _ts(started_at + 5.8),
            "stopped_at": _ts(stops[number]),
            "exit_code": 0,
            "log_path": log_path,
            "libraries": _library_entries(),
        }
        _write(out / f"conditions/{condition}/servers/{number}.json", document)
        log = out / f"conditions/{condition}/servers/{number}.log"
        log.write_text(_server_log(number, cache_disabled), encoding="utf-8")
    return clock + 3.0


def write_seed_raw(out: Path) -> None:
    """Write the raw capture directory `out` (which must not exist)."""
    out.mkdir(parents=True, exist_ok=False)
    conditions = [
        ("sdpa-det-0", {"MLXCEL_SDPA_DETERMINISTIC": "0"}),
        ("sdpa-det-1", {"MLXCEL_SDPA_DETERMINISTIC": "1"}),
    ]
    clock = 0.0
    for condition, settings in conditions:
        clock = _write_condition(out, condition, settings, clock)

    manifest_files = [
        {
            "path": name,
            "size": size,
            "sha256": KNOWN_DIGESTS.get(name, _stand_in_digest(name)),
        }
        for name, size in MODEL_FILES
    ]
    _write(
        out / "model-manifest.json",
        {
            "schema_version": SCHEMA_VERSION,
            "kind": "evidence.raw-model-manifest",
            "root": MODEL_DIR,
            "repo_id": "mlx-community/Qwen3-1.7B-4bit",
            "revision": "3b1b1768f8f8cf8351c712464f906e86c2b8269e",
            "files": manifest_files,
        },
    )
    argv = [
        "evidence", "capture", "--server-profile", "mlxcel", "--binary", BINARY,
        "--model", MODEL_DIR, "--output", f"{WORKDIR}/raw",
        "--condition", "sdpa-det-0:MLXCEL_SDPA_DETERMINISTIC=0",
        "--condition", "sdpa-det-1:MLXCEL_SDPA_DETERMINISTIC=1",
        "--cycles", "2", "--max-tokens", "800", "--port", str(PORT), "--wall-timeout", "750",
    ]  # fmt: skip
    run = {
        "schema_version": SCHEMA_VERSION,
        "kind": "evidence.raw-run",
        "title": "Qwen3-1.7B-4bit on GB10: cold/warm prompt-cache split (seed-shaped sample)",
        "notes": [
            "Synthetic sample shaped like the seed report (mlxcel #2175); the story texts are "
            "stand-ins because the report publishes only excerpts, so the output hashes differ "
            "from the report's A and B.",
            "Private values (user, host, paths, tokens) are fake; export removes them.",
        ],
        "synthetic": True,
        "capture_tool": {"name": "evidence", "version": "0.1.0"},
        "argv": argv,
        "started_at": _ts(0),
        "finished_at": _ts(clock),
        "outcome": "completed",
        "host": {
            "user": USER,
            "hostname": HOST,
            "home": HOME,
            "cwd": WORKDIR,
            "tmpdir": "/tmp",
            "os": "Linux",
            "kernel": "6.11.0-1016-nvidia",
            "machine": "aarch64",
            "cpu": "ARM Cortex-X925 / Cortex-A725",
            "cpu_count": 20,
            "accelerator": "NVIDIA GB10 (sm_121)",
            "driver_versions": {
                "nvidia_driver": "580.178.04",
                "cuda_compiler": "13.0.88",
                "cuda_runtime": "13.0.96",
                "cudnn_headers": "9.13.0",
                "cudnn_runtime": "9.13.0",
                "mlx": "81ba1c6a0e50a9268b931579c2d4f1158b9aab5a",
            },
            "python": "3.12.3",
        },
        "server": {
            "profile": "mlxcel",
            "profile_version": MLXCEL_RULES.version,
            "name": "mlxcel-server",
            "binary_path": BINARY,
            "binary_sha256": "e9d52181962009218f539569802d5fc2a389fb607d18ffad2b14b2f41dfdc608",
            "version": "mlxcel-server 0.9.0",
            "build_commit": "e466f5118b8e25d0c9a295ab017468db77b87313",
            "attached": False,
            "url": None,
            "alias": ALIAS,
            "experiment_env_prefixes": ["MLX", "MLXCEL_", "APC_", "LLAMA_"],
        },
        "model": {
            "path": MODEL_DIR,
            "repo_id": "mlx-community/Qwen3-1.7B-4bit",
            "revision": "3b1b1768f8f8cf8351c712464f906e86c2b8269e",
            "model_file": "model.safetensors",
            "config_file": "config.json",
        },
        "request_body": REQUEST_BODY,
        "conditions": [
            {"id": cid, "label": ",".join(f"{k}={v}" for k, v in s.items()), "settings": s}
            for cid, s in conditions
        ],
        "protocol": {
            "cycles": 2,
            "warm_per_cycle": 2,
            "restart_warm": 1,
            "max_tokens": 800,
            "parallelism": 4,
            "block_size": 32,
            "opt_out_repeats": 3,
            "disabled_repeats": 3,
            "request_timeout_s": 300.0,
            "wall_timeout_s": 750.0,
            "skipped_phases": [],
        },
        "profile_rules": MLXCEL_RULES.to_json(),
    }
    _write(out / "run.json", run)
    (out / "harness.log").write_text(
        f"{_ts(0)} capture started by {USER}@{HOST} in {WORKDIR}\n"
        f"{_ts(0)} binary {BINARY} sha256 {_library_entries()[0]['sha256']}\n"
        f"{_ts(0)} model {MODEL_DIR} hashed: 9 files\n"
        f"{_ts(clock)} capture finished: 28 requests\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    import sys

    write_seed_raw(Path(sys.argv[1]))
