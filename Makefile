# Two entry points: `make demo` and `make test`. Both create the virtual environment first.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
KEY     = sample_bundles/keys/evidence-signing-key.pub.pem
DEMO    = $(VENV)/demo

.PHONY: demo test lint typecheck pytest fuzz samples real-sample gpu-sample bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	@echo "== 1. verify the seed-shaped sample (mlxcel, two conditions, signed)" >&2
	$(BIN)/evidence verify sample_bundles/seed-mlxcel --key $(KEY)
	@echo "== 2. export the committed raw sample to a public bundle, then verify it (Markdown, as pasted into an issue)" >&2
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(BIN)/evidence export sample_bundles/raw/seed-mlxcel --out $(DEMO)/public --archive $(DEMO)/public.tar.gz
	$(BIN)/evidence verify $(DEMO)/public.tar.gz --format markdown
	@echo "== 3. verify the real llama.cpp capture (llama-server on this CPU, tiny model)" >&2
	$(BIN)/evidence verify sample_bundles/llama-cpp-real.tar.gz --key $(KEY) --expect cache-state-dependent
	@echo "== 4. verify the real GPU captures (llama-server on CUDA, NVIDIA H200, flash attention on/off)" >&2
	$(BIN)/evidence verify sample_bundles/llama-cpp-cuda-flip.tar.gz --key $(KEY) --expect cache-state-dependent
	$(BIN)/evidence verify sample_bundles/llama-cpp-cuda-stable.tar.gz --key $(KEY) --expect cache-state-independent
	@echo "== done. The command is $(BIN)/evidence (or: source $(BIN)/activate, then evidence)." >&2
	@echo "== Next: README.md, 'Your first capture' (a real llama-server on this CPU)." >&2

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check verifier tests tools
	$(BIN)/ruff format --check verifier tests tools

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

# The archive fuzzer of tests/test_verify_fuzz.py with many more examples than `make test`.
fuzz: $(STAMP)
	EVIDENCE_FUZZ_EXAMPLES=20000 $(BIN)/pytest -q tests/test_verify_fuzz.py -k archive

samples: $(STAMP)
	$(BIN)/python tools/make_samples.py

real-sample: $(STAMP)
	$(BIN)/python tools/llama_pipeline.py --prompt flip --sample

# On a CUDA machine: build llama-server with CUDA, search, capture, export, verify (see README).
GPU_OUT ?= build/gpu-sample
gpu-sample: $(STAMP)
	$(BIN)/python tools/gpu_sample.py run --out $(GPU_OUT) --work $(GPU_OUT)/work

bench: $(STAMP)
	$(BIN)/python tools/bench.py

clean:
	rm -rf $(VENV) build dist .mypy_cache .pytest_cache .ruff_cache
