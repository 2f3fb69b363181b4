"""Capture: run the cache-state protocol against a server and write the private raw directory.

Pipeline stage 1 of 3 (capture -> export -> verify). The public entry point is
`run_capture(CaptureConfig, progress)`; `protocol` holds the steps as data and
`profiles` one small module per server.
"""

from __future__ import annotations

from verifier.capture.harness import (
    CaptureConfig,
    CaptureFailed,
    CaptureSummary,
    NullProgress,
    ProgressSink,
    RequestEvent,
    WallTimeout,
    run_capture,
)
from verifier.profiles import PROFILES, get_profile
from verifier.protocol import (
    Condition,
    ProtocolSpec,
    parse_conditions,
    prepare_request_body,
)

__all__ = [
    "PROFILES",
    "CaptureConfig",
    "CaptureFailed",
    "CaptureSummary",
    "Condition",
    "NullProgress",
    "ProgressSink",
    "ProtocolSpec",
    "RequestEvent",
    "WallTimeout",
    "get_profile",
    "parse_conditions",
    "prepare_request_body",
    "run_capture",
]
