"""evidence: capture, export and verify evidence of cache-state-dependent LLM server output."""

__version__ = "0.1.0"
