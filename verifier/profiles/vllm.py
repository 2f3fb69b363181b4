"""vLLM's OpenAI-compatible server (SERVERS.md; not run here)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

from verifier.profiles.base import LaunchSpec, ResetCall, ServerLimits, ServerProfile
from verifier.profiles.rules import CacheSignals, ProfileRules, ResetProof


class VllmProfile(ServerProfile):
    def start_argv(self, spec: LaunchSpec) -> list[str]:
        argv = [str(spec.binary), "serve", str(self.model_argument(spec.model))]
        argv += ["--served-model-name", spec.alias, "--host", "127.0.0.1", "--port", str(spec.port)]
        argv.append("--enable-prompt-tokens-details")
        argv.append(CACHE_OFF_FLAG if spec.cache_disabled else CACHE_ON_FLAG)
        return argv + list(spec.extra_args)

    @property
    def cache_on_args(self) -> tuple[str, ...]:
        return (CACHE_ON_FLAG,)

    @property
    def omits_no_cached_tokens(self) -> bool:
        # its chat answers carry `prompt_tokens_details` only `if
        # self.enable_prompt_tokens_details and final_res.num_cached_tokens`
        # (entrypoints/openai/serving_chat.py): a miss's answer has none
        return True

    @property
    def long_options_read_with_underscores(self) -> bool:
        # FlexibleArgumentParser reads `--max_num_batched_tokens` as `--max-num-batched-tokens`
        return True

    def models_named(
        self, argv: Sequence[str], environment: Mapping[str, str]
    ) -> Iterator[tuple[str, str]]:
        """`--model`, and the model `vllm serve MODEL` names positionally, where start_argv
        writes it: the argument right after `serve`, where it is no option. (Further on, an
        argument cannot be told from the value of an option before it without vLLM's whole
        table of options, which switch each is: `--async-scheduling 127.0.0.1` is no model.)"""
        yield from self.option_values(argv, environment, self.model_options)
        if "serve" not in argv:
            return
        at = list(argv).index("serve") + 1
        if at < len(argv) and not argv[at].startswith("-"):
            yield "serve " + argv[at], argv[at]

    def cache_state_in_metrics(self, metrics: Mapping[str, float]) -> frozenset[bool]:
        """The `enable_prefix_caching` label of the `vllm:cache_config_info` gauge (SERVERS.md:
        the server's own statement that its cache is on or off), `True` or `False` as vLLM
        writes a Python bool (any case); another value says nothing."""
        said: set[bool] = set()
        for key in metrics:
            if key.startswith(_CACHE_CONFIG):
                label = _PREFIX_CACHING.search(key, len(_CACHE_CONFIG) - 1)
                if label is not None and label.group(1).lower() in ("true", "false"):
                    said.add(label.group(1).lower() == "true")
        return frozenset(said)

    @property
    def says_cache_state_in_metrics(self) -> bool:
        return True

    @property
    def reuse_within_lookups(self) -> bool:
        return True  # prefix_cache_hits and prefix_cache_queries both count tokens

    def cached_tokens_from_elsewhere(self, argv: Sequence[str]) -> bool:
        # A KV connector (`--kv-transfer-config`: LMCache, CPU offloading) loads cached
        # tokens from another tier: num_cached_tokens counts them, prefix_cache_hits only
        # the local cache's (vLLM's source; SERVERS.md does not cover connectors).
        return any(
            self.option_name(arg) in ("--kv-transfer-config", "--kv-connector") for arg in argv
        )

    @property
    def switches(self) -> Mapping[str, tuple[str, ...]]:
        # usage.prompt_tokens_details.cached_tokens only with it (SERVERS.md); /metrics always
        return {"cached_tokens": ("--enable-prompt-tokens-details",)}

    @property
    def counted_work(self) -> tuple[tuple[str, str], ...]:
        # Both counted in tokens (SERVERS.md): the hits are the tokens the cache supplied,
        # what cached_tokens counts; the queries, the prompt tokens looked up, none past the
        # prompt. (vllm:prompt_tokens_total and generation_tokens_total are not in
        # SERVERS.md: not read.)
        return (
            ("metric:vllm:prefix_cache_hits_total", "cached"),
            ("metric:vllm:prefix_cache_queries_total", "looked_up"),
        )

    @property
    def other_hit_counters(self) -> tuple[str, ...]:
        # newer builds' own second account of the prompt tokens the cache supplied
        # (SERVERS.md, additions): absent from older builds, so never needed, but a rise
        # across a request that claims no cache use leaves it unproven; of the tokens by
        # source, every source but the prompt computed here is a cache's
        return (
            "metric:vllm:prompt_tokens_cached_total",
            'metric:vllm:prompt_tokens_by_source_total{source!="local_compute"}',
        )

    def limits(self, argv: Sequence[str], environment: Mapping[str, str]) -> ServerLimits:
        """vLLM's `max_new_tokens` in `--override-generation-config` (or in a generation
        config folder it is pointed to, which a bundle does not hold) caps every reply;
        `--max-model-len` bounds a prompt and its reply; a `--config` file may set either."""
        unread = [where for where, _ in self.option_values(argv, environment, _CONFIG_FILE)]
        unread += [
            where
            for where, value in self.option_values(argv, environment, _GENERATION_CONFIG)
            if value not in ("auto", "vllm")  # the model's own, or none: as by default
        ]
        caps = self.json_caps_given(argv, environment, _OVERRIDE, _CAP_KEYS, unread)
        # and vLLM's dotted form of a JSON argument: `--override-generation-config.KEY V`
        # (option_values reads a long option's `_` as `-`, its key's too)
        dotted = {f"--override-generation-config.{key.replace('_', '-')}" for key in _CAP_KEYS}
        caps += self.counts_given(argv, environment, dotted, unread)
        contexts = []
        for where, value in self.option_values(argv, environment, _CONTEXT):
            size = _SIZE.fullmatch(value)  # vLLM reads `32k` as 32,000 and `32K` as 32,768
            if size is None:
                unread.append(where)
            else:
                unit = _UNITS[size.group(2)] if size.group(2) else 1
                contexts.append(int(float(size.group(1)) * unit))
        return ServerLimits.read(caps, contexts, unread)


_CONFIG_FILE = frozenset(("--config",))
_GENERATION_CONFIG = frozenset(("--generation-config",))
_OVERRIDE = frozenset(("--override-generation-config",))
_CAP_KEYS = frozenset(("max_new_tokens", "max_tokens"))
_CONTEXT = frozenset(("--max-model-len",))
_SIZE = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,6})?)([kmgKMG]?)")
_UNITS = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}

CACHE_OFF_FLAG = "--no-enable-prefix-caching"
CACHE_ON_FLAG = "--enable-prefix-caching"
_CACHE_CONFIG = "vllm:cache_config_info{"
_PREFIX_CACHING = re.compile(r'[{,]\s*enable_prefix_caching\s*=\s*"([^"\\]*)"')

RULES = ProfileRules(
    server_name="vllm",
    toggle_prefixes=("VLLM_",),
    name="vllm",
    version="1",
    signals=CacheSignals(
        # Both are counted in tokens; queries advance on every request that reaches the cache.
        reuse=("metric:vllm:prefix_cache_hits_total",),
        lookups=("metric:vllm:prefix_cache_queries_total",),
    ),
    # POST /reset_prefix_cache answers 200 without checking: the next cold request proves it.
    reset_proof=ResetProof.NEXT_COLD_REQUEST,
    cache_off_args=(CACHE_OFF_FLAG,),
    logprobs_top_k=5,  # OpenAI-style logprobs + top_logprobs on /v1/chat/completions
    opt_out_fields=None,
)

PROFILE = VllmProfile(
    reset=ResetCall("POST", "/reset_prefix_cache"),
    rules=RULES,
    # /reset_prefix_cache is mounted only in dev mode.
    extra_env={"VLLM_SERVER_DEV_MODE": "1"},
    opt_out_missing_reason="vLLM has no per-request prefix-cache opt-out",
    block_size=16,
)
