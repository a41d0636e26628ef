#!/usr/bin/env bash
# Builds kiln and runs the whole test suite (unit, fault, conformance, server groups).
# Usage: scripts/test.sh [LABEL]   e.g. scripts/test.sh unit
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
scripts/build.sh release
# The test data that is not committed (llama.cpp's vocabularies, the test models, the quantizer
# fixtures): made once into build/test-data, then only checked (tools/fixtures/make_test_data.py).
/usr/bin/python3 tools/fixtures/make_test_data.py --kiln build/release/kiln
# The OpenAI SDK test's npm packages: `npm ci` when a dependency pinned in package.json is missing
# from node_modules or has another version; otherwise nothing (offline runs reuse them).
node_dir=tests/server/node
if ! (cd "$node_dir" && node -e '
  const fs = require("fs");
  const pins = JSON.parse(fs.readFileSync("package.json", "utf8")).dependencies;
  for (const [name, version] of Object.entries(pins)) {
    const f = `node_modules/${name}/package.json`;
    if (!fs.existsSync(f) || JSON.parse(fs.readFileSync(f, "utf8")).version !== version) process.exit(1);
  }'); then
  (cd "$node_dir" && npm ci --no-audit --no-fund)
fi
args=(--test-dir build/release --output-on-failure -j "$(nproc)")
[[ -n "${1:-}" ]] && args+=(-L "$1")
ctest "${args[@]}"
