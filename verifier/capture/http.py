"""A tiny urllib JSON client: one request, its own timeout, never a proxy, never an exception."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from verifier.errors import EvidenceError
from verifier.jsonio import MAX_DEPTH, loads_strict

# Loopback servers must never be reached through an inherited HTTP(S)_PROXY.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MAX_BODY = 64 * 1024 * 1024
# A reply is kept in the raw documents at most three levels down (an exchange's
# telemetry.before.cache_stats), which export reads at MAX_DEPTH: a deeper reply is recorded
# as text, never written where it could not be read back.
REPLY_MAX_DEPTH = MAX_DEPTH - 4


@dataclass(frozen=True)
class HttpResult:
    """What came back: a status (None when no answer), headers, the raw body, or an error."""

    status: int | None
    body: bytes
    elapsed_s: float
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The parsed body, or None when it is not JSON by the tool's strict rules.

        The reply is evidence, written to the raw capture and read back by export with
        loads_strict: one the strict reader refuses (NaN, a lone surrogate, a duplicate key,
        absurd nesting, too many values) is taken as not JSON, so that the harness records
        its text, as it does any other reply that is not JSON, instead of a document it
        could not write or read back."""
        try:
            return loads_strict(self.body, max_depth=REPLY_MAX_DEPTH)
        except EvidenceError:
            return None


def request(method: str, url: str, body: Any = None, *, timeout: float) -> HttpResult:
    """Send one request; a refused connection or a timeout is a result, not an exception."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url}")
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, method=method)  # noqa: S310 (scheme checked)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    started = time.monotonic()
    try:
        with _OPENER.open(req, timeout=max(timeout, 0.001)) as response:
            payload = response.read(MAX_BODY)
            return HttpResult(
                response.status, payload, time.monotonic() - started, dict(response.headers)
            )
    except urllib.error.HTTPError as exc:
        with exc:  # an error answer holds its connection open until closed
            payload = exc.read(MAX_BODY) if exc.fp is not None else b""
            headers = dict(exc.headers) if exc.headers is not None else {}
            return HttpResult(exc.code, payload, time.monotonic() - started, headers, str(exc))
    except TimeoutError as exc:
        return HttpResult(None, b"", time.monotonic() - started, error=str(exc), timed_out=True)
    except urllib.error.URLError as exc:
        timed_out = isinstance(exc.reason, TimeoutError)
        error = f"{type(exc.reason).__name__}: {exc.reason}"
        return HttpResult(None, b"", time.monotonic() - started, error=error, timed_out=timed_out)
    except (OSError, ValueError, http.client.HTTPException) as exc:  # reset, bad status line
        return HttpResult(
            None, b"", time.monotonic() - started, error=f"{type(exc).__name__}: {exc}"
        )


def get_json(url: str, *, timeout: float) -> tuple[int | None, Any]:
    """Status and parsed body of a GET (body None when not JSON or no answer)."""
    result = request("GET", url, timeout=timeout)
    return result.status, result.json() if result.status is not None else None
