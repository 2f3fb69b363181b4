"""llama.cpp's llama-server (SERVERS.md; flags checked against the 0.3.36 vendored build)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from verifier.profiles.base import (
    LaunchSpec,
    ResetCall,
    ServerLimits,
    ServerProfile,
    single_file_in,
)
from verifier.profiles.rules import CacheSignals, ProfileRules, ResetProof


class LlamaCppProfile(ServerProfile):
    @property
    def model_options(self) -> tuple[str, ...]:
        # and the other sources llama-server loads a model from: a URL, a Hugging Face repo
        return ("-m", "--model", "-mu", "--model-url", "-hf", "-hfr", "--hf-repo", "-hff",
                "--hf-file", "-dr", "--docker-repo", "--models-dir")  # fmt: skip

    @property
    def model_is_file(self) -> bool:
        return True  # -m names the one GGUF file it loads (model_argument)

    def start_argv(self, spec: LaunchSpec) -> list[str]:
        argv = [str(spec.binary), "-m", str(self.model_argument(spec.model))]
        argv += ["--alias", spec.alias, "--host", "127.0.0.1", "--port", str(spec.port)]
        # One slot and no host-RAM prompt cache: otherwise an erased slot is refilled from
        # RAM and the "cold" request after a reset still reports cached tokens.
        argv += ["-np", "1", "--cache-ram", "0", "--slot-save-path", str(spec.scratch_dir)]
        argv += ["--metrics", "--no-warmup"]
        if spec.cache_disabled:
            # Sets the server-wide default of the request field `cache_prompt` to false; the
            # harness's body never sets that field, so every request of the arm computes cold.
            argv.append(CACHE_OFF_FLAG)
        return argv + list(spec.extra_args)

    @property
    def created_when_answered(self) -> bool:
        return True

    @property
    def switches(self) -> Mapping[str, tuple[str, ...]]:
        # /metrics answers 501 without --metrics (SERVERS.md); every llama-server option
        # can be set by its LLAMA_ARG_ variable instead
        return {"metrics": ("--metrics", "LLAMA_ARG_ENDPOINT_METRICS")}

    @property
    def work_counters(self) -> tuple[str, ...]:
        return ("metric:llamacpp:prompt_tokens_total", "metric:llamacpp:tokens_predicted_total")

    @property
    def seconds_counters(self) -> tuple[tuple[str, str], ...]:
        # llama-server adds each request's t_prompt_processing and t_token_generation to
        # these as it ends the request; in the three llama.cpp samples (44 requests)
        # tokens_predicted_seconds_total moved by the answer's predicted_ms to the digits
        # /metrics writes, prompt_seconds_total by its prompt_ms less 0.02-0.15 ms; both
        # read 0 on each fresh server, and neither moved between two requests
        return (
            ("metric:llamacpp:prompt_seconds_total", "/timings/prompt_ms"),
            ("metric:llamacpp:tokens_predicted_seconds_total", "/timings/predicted_ms"),
        )

    @property
    def busy_gauges(self) -> tuple[str, ...]:
        # worked out by the server loop as it answers /metrics: the slots then processing and
        # the tasks then deferred; 0 in every snapshot of the four llama.cpp samples
        return ("metric:llamacpp:requests_processing", "metric:llamacpp:requests_deferred")

    @property
    def decode_counter(self) -> str | None:
        # one llama_decode() a prompt batch and one a generated token but the last: in every
        # request of the four llama.cpp samples it moved by exactly the completion tokens
        # (one prompt batch); only the bound is read, as a batch size or a draft model
        # (several tokens a call) moves it by less
        return "metric:llamacpp:n_decode_total"

    @property
    def counted_work(self) -> tuple[tuple[str, str], ...]:
        # llama-server adds each request's timings.prompt_n (its prompt tokens less those
        # from the cache) and its decoded tokens when the request ends (SERVERS.md: the
        # prompt counter excludes cached tokens); every request of the four llama.cpp
        # samples moves them by exactly that
        return (
            ("metric:llamacpp:prompt_tokens_total", "computed"),
            ("metric:llamacpp:tokens_predicted_total", "completion"),
        )

    def limits(self, argv: Sequence[str], environment: Mapping[str, str]) -> ServerLimits:
        """llama-server lowers each request's cap to its `-n` (a request cannot raise it),
        stops a reply where its slot's context is full (`-c` shared by `-np` slots), and
        samples with its own `--samplers` list where a request names none; dynamic
        temperature, XTC and mirostat sample even at temperature 0."""
        unread: list[str] = []
        caps = self.counts_given(argv, environment, _CAP, unread)
        contexts = self.counts_given(argv, environment, _CONTEXT, unread)
        slots = self.counts_given(argv, environment, _SLOTS, unread)
        cap = min((c for c in caps if c >= 0), default=None)  # -1: no cap; -2: the context
        context = min((c for c in contexts if c > 0), default=None)  # 0: the model's own
        if context is not None and slots:
            if min(slots) < 1:  # -1: as many slots as it sees fit
                unread.append(f"-c {context} shared by -np {min(slots)}")
            else:
                context //= max(slots)
        return ServerLimits(
            reply_cap=cap,
            context=context,
            unread=", ".join(unread) or None,
            sampling=self._sampling(argv, environment),
        )

    def _sampling(self, argv: Sequence[str], environment: Mapping[str, str]) -> str | None:
        for where, _ in self.option_values(argv, environment, _SAMPLER_LISTS):
            return f"the server is started with {where}, which a request naming none uses"
        for where, value in self.option_values(argv, environment, _SAMPLE_ANYWAY):
            try:
                neutral = float(value) == 0
            except ValueError:
                neutral = False
            if not neutral:
                return f"the server is started with {where}, which samples at temperature 0"
        return None

    def version_commit(self, version: str) -> str | None:
        # `llama-server --version`: "version: 5890 (0c1e570)" or, in builds that know no
        # tag, "version: 0.5.0-dev (build 1, commit 0c1e570)"
        named = _VERSION_COMMIT.search(version)
        return named.group(1).lower() if named is not None else None

    def model_argument(self, model: Path) -> Path:
        return single_file_in(model, ".gguf")

    def spellings(self, option: str) -> tuple[str, ...]:
        long = _LONG.get(option, option)
        return tuple(dict.fromkeys((option, long, *_SHORT.get(long, ()))))

    @property
    def long_options_read_with_underscores(self) -> bool:
        # common/arg.cpp: `if (arg.compare(0, 2, "--") == 0) std::replace(arg..., '_', '-')`
        # before an option is looked up, so `--flash_attn` is `--flash-attn`
        return True

    def toggle_options(self, toggle: str) -> tuple[str, ...]:
        """`LLAMA_ARG_FLASH_ATTN` is `--flash-attn` (and `-fa`): llama-server reads each
        `LLAMA_ARG_*` as its option (`.set_env(...)` in common/arg.cpp), and the option,
        where both are given, wins."""
        if not toggle.startswith(_ARG_PREFIX):
            return ()
        name = toggle.removeprefix(_ARG_PREFIX)
        option = _ENV_OPTION.get(name) or "--" + name.lower().replace("_", "-")
        return (option, *_SHORT.get(option, ()))


CACHE_OFF_FLAG = "--no-cache-prompt"
_VERSION_COMMIT = re.compile(
    r"^version: [^\n]*\((?:build [0-9]+, commit )?([0-9a-f]{7,40})\)", re.IGNORECASE | re.MULTILINE
)

_ARG_PREFIX = "LLAMA_ARG_"
# Options whose environment variable is not their own long name (common/arg.cpp:
# `{"-b", "--batch-size"} ... .set_env("LLAMA_ARG_BATCH")`, `{"-ub", "--ubatch-size"} ...
# .set_env("LLAMA_ARG_UBATCH")`, `{"-np", "--parallel"} ... .set_env("LLAMA_ARG_N_PARALLEL")`,
# `{"--metrics"} ... .set_env("LLAMA_ARG_ENDPOINT_METRICS")`, `{"--rope-scaling"} ...
# .set_env("LLAMA_ARG_ROPE_SCALING_TYPE")`), by the name after LLAMA_ARG_; and the short
# spellings of the options an experiment is likeliest to vary (llama-server --help, 0.3.36;
# `-dev`, `-nkvo`, `-mg`, `-ts`, `-ot`, `-tb` as common/arg.cpp spells them).
_ENV_OPTION = {
    "N_PARALLEL": "--parallel",
    "N_CTX": "--ctx-size",
    "BATCH": "--batch-size",
    "UBATCH": "--ubatch-size",
    "ENDPOINT_METRICS": "--metrics",
    "ROPE_SCALING_TYPE": "--rope-scaling",
}
_SHORT = {
    "--flash-attn": ("-fa",),
    "--ctx-size": ("-c",),
    "--batch-size": ("-b",),
    "--ubatch-size": ("-ub",),
    "--n-gpu-layers": ("-ngl", "--gpu-layers"),
    "--threads": ("-t",),
    "--threads-batch": ("-tb",),
    "--parallel": ("-np",),
    "--cache-type-k": ("-ctk",),
    "--cache-type-v": ("-ctv",),
    "--split-mode": ("-sm",),
    "--device": ("-dev",),
    "--no-kv-offload": ("-nkvo",),
    "--main-gpu": ("-mg",),
    "--tensor-split": ("-ts",),
    "--override-tensor": ("-ot",),
    # the model's sources: LLAMA_ARG_MODEL is -m, and so on (model_options)
    "--model": ("-m",),
    "--model-url": ("-mu",),
    "--hf-repo": ("-hf", "-hfr"),
    "--hf-file": ("-hff",),
    "--docker-repo": ("-dr",),
}
_LONG = {short: long for long, shorts in _SHORT.items() for short in shorts}
# What a server sets for every request (`limits`), in each spelling llama-server reads.
_CAP = frozenset(("-n", "--predict", "--n-predict"))
_CONTEXT = frozenset(("-c", "--ctx-size"))
_SLOTS = frozenset(("-np", "--parallel"))
_SAMPLER_LISTS = frozenset(("--samplers", "--sampling-seq", "--sampler-seq"))
_SAMPLE_ANYWAY = frozenset(("--dynatemp-range", "--xtc-probability", "--mirostat"))

RULES = ProfileRules(
    server_name="llama-server",
    toggle_prefixes=("LLAMA_", "GGML_"),
    per_instance_args=("--slot-save-path",),  # a scratch folder per server
    # Seen here: the cached-tokens counter moves by exactly the response's cached_tokens.
    reuse_counts_cached_tokens=True,
    name="llama.cpp",
    version="1",
    # No hit counter and no store statistics: the reuse counter is the only cache signal.
    signals=CacheSignals(reuse=("metric:llamacpp:prompt_tokens_cached_total",)),
    # The slot erase answers without proof: the next cold request's cached_tokens == 0 is it.
    reset_proof=ResetProof.NEXT_COLD_REQUEST,
    cache_off_args=(CACHE_OFF_FLAG,),
    logprobs_top_k=5,  # OpenAI-style logprobs + top_logprobs on /v1/chat/completions
    opt_out_fields={"cache_prompt": False},
)

PROFILE = LlamaCppProfile(
    reset=ResetCall("POST", "/slots/0?action=erase"),
    rules=RULES,
    # Server defaults differ between builds: pin every sampling setting.
    pinned_request_fields={
        "temperature": 0,
        "top_k": 1,
        "top_p": 1.0,
        "min_p": 0.0,
        "repeat_penalty": 1.0,
        "seed": 0,
    },
    parallelism=1,
)
