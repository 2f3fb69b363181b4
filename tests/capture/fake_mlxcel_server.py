#!/usr/bin/env python3
"""A fake mlxcel-server: the flags, endpoints and telemetry of SERVERS.md, no model.

Warm hits (a cached prompt, cache on, no opt-out) answer output B, everything else A,
like the seed report. Test hooks, read from the environment:
FAKE_EXIT_AT_START (print a fatal error and exit 3), FAKE_STARTUP_DELAY (seconds before
listening), FAKE_REQUEST_DELAY (seconds per chat request), FAKE_IGNORE_SIGTERM,
FAKE_CHILD_PID_FILE (spawn a sleeping child and write its pid there),
FAKE_RESET_KEEPS_ENTRIES (the reset answers cleared:true but clears nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BLOCK = 32
PROMPT_TOKENS = 42
OUTPUT_A = "It was a cold, gray morning when the wind began to howl."
OUTPUT_B = "It was a cold, gray morning when the wind picked up."


class State:
    def __init__(self, cache_on: bool, metrics: bool) -> None:
        self.cache_on = cache_on
        self.metrics = metrics
        self.lock = threading.Lock()
        self.entries: set[str] = set()
        self.hits = self.misses = self.reused = 0
        self.prompt = 0  # the prompt tokens computed (llama.cpp's reading; SERVERS.md)
        self.lookups = self.store_hits = self.inserts = 0
        self.gather = 0


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            sys.stderr.write("fake: " + format % args + "\n")

        def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, {"status": "ok"})
            elif self.path == "/v1/cache/stats":
                with state.lock:
                    self._send(200, stats(state))
            elif self.path == "/metrics":
                if not state.metrics:
                    self._send(501, {"error": "metrics disabled"})
                    return
                with state.lock:
                    self._send(200, metrics(state).encode(), "text/plain; version=0.0.4")
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            if self.path == "/v1/cache/reset":
                with state.lock:
                    freed = len(state.entries)
                    if not os.environ.get("FAKE_RESET_KEEPS_ENTRIES"):
                        state.entries.clear()
                self._send(
                    200, {"cleared": True, "freed_bytes": freed * 1024, "freed_entries": freed}
                )
            elif self.path == "/v1/chat/completions":
                self._send(200, complete(state, json.loads(raw)))
            else:
                self._send(404, {"error": "not found"})

    return Handler


def stats(state: State) -> dict[str, Any]:
    return {
        "enabled": state.cache_on,
        "apc_enabled": state.cache_on,
        "block_size": BLOCK,
        "paged_block_size": BLOCK,
        "entries": len(state.entries),
        "bytes": len(state.entries) * 1024,
        "hits": state.store_hits,
        "lookups": state.lookups,
        "inserts": state.inserts,
        "hit_rate": state.store_hits / state.lookups if state.lookups else 0.0,
        "evictions_lru": 0,
        "evictions_ttl": 0,
    }


def metrics(state: State) -> str:
    return (
        "# HELP mlxcel_prompt_cache_hits_total Prompt cache hits\n"
        "# TYPE mlxcel_prompt_cache_hits_total counter\n"
        f"mlxcel_prompt_cache_hits_total {state.hits}\n"
        f"mlxcel_prompt_cache_misses_total {state.misses}\n"
        f"mlxcel_prompt_cache_prefix_tokens_reused_total {state.reused}\n"
        f'mlxcel_paged_decode_launches_total{{path="gather"}} {state.gather}\n'
        'mlxcel_paged_decode_launches_total{path="fused_v2"} 0\n'
        'mlxcel_paged_decode_launches_total{path="cascade"} 0\n'
        f"llamacpp:prompt_tokens_total {state.prompt}\n"
        f"llamacpp:prompt_tokens_cached_total {state.reused}\n"  # (SERVERS.md)
    )


def complete(state: State, body: dict[str, Any]) -> dict[str, Any]:
    time.sleep(float(os.environ.get("FAKE_REQUEST_DELAY", "0")))
    key = json.dumps(body.get("messages"), sort_keys=True)
    use_cache = state.cache_on and body.get("cache_prompt", True) is not False
    with state.lock:
        cached = 0
        if use_cache:
            state.lookups += 1
            if key in state.entries:
                cached = BLOCK
                state.hits += 1
                state.store_hits += 1
                state.reused += BLOCK
            else:
                state.entries.add(key)
                state.inserts += 1
                # mlxcel's scheduler counts a miss only where the request uses the cache
                # ("to avoid inflating the miss counter for ... cache-disabled requests")
                state.misses += 1
        state.prompt += PROMPT_TOKENS - cached
        state.gather += 12 if cached else 9
    # twelve tokens, or the request's cap if less: a server stops at its cap
    caps = [c for c in (body.get("max_tokens"), body.get("n_predict")) if isinstance(c, int)]
    usage: dict[str, Any] = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": min([12, *caps])}
    if state.cache_on:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": OUTPUT_B if cached else OUTPUT_A},
            }
        ],
        "usage": usage,
    }


def main() -> int:
    if "--version" in sys.argv:
        print("mlxcel-server 0.0.0-fake (commit 0123456789abcdef0123456789abcdef01234567)")
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("-m", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--parallel", type=int, required=True)
    parser.add_argument("--metrics", action="store_true")
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--no-prompt-cache", action="store_true")
    parser.add_argument("--prefill-chunk-size", type=int)
    args = parser.parse_args()
    print(f"fake mlxcel-server pid {os.getpid()} model {args.m}", flush=True)
    if os.environ.get("FAKE_EXIT_AT_START"):
        print("fatal: cannot load the model: tensor 'lm_head' missing", flush=True)
        return 3
    if os.environ.get("FAKE_IGNORE_SIGTERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child_file = os.environ.get("FAKE_CHILD_PID_FILE")
    if child_file:
        child = subprocess.Popen(["sleep", "600"])
        with open(child_file, "w") as handle:
            handle.write(str(child.pid))
    time.sleep(float(os.environ.get("FAKE_STARTUP_DELAY", "0")))
    state = State(cache_on=not args.no_prompt_cache, metrics=args.metrics)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(state))
    print("listening", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
