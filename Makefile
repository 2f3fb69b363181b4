# Two entry points: `make demo` and `make test`. Both create the virtual environment first.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: demo test lint typecheck pytest samples bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	@echo "== verify the seed-shaped sample (mlxcel, two conditions)" >&2
	$(BIN)/evidence verify sample_bundles/seed-mlxcel
	@echo "== export the committed raw sample, then verify the result" >&2
	@rm -rf $(VENV)/demo-public
	$(BIN)/evidence export sample_bundles/raw/seed-mlxcel --out $(VENV)/demo-public
	$(BIN)/evidence verify $(VENV)/demo-public --format markdown
	@echo "== verify the real llama.cpp capture (signed)" >&2
	$(BIN)/evidence verify sample_bundles/llama-cpp-real.tar.gz

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check verifier tests tools
	$(BIN)/ruff format --check verifier tests tools

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

samples: $(STAMP)
	$(BIN)/python tools/make_samples.py

bench: $(STAMP)
	$(BIN)/python tools/bench.py

clean:
	rm -rf $(VENV) build dist .mypy_cache .pytest_cache .ruff_cache
