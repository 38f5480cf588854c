#!/usr/bin/env bash
# The Node.js binding: installs the npm devDependencies from the committed lock (`npm ci`;
# package.json pins @napi-rs/cli's lzma/tar/wasm-tools to versions published for every
# platform, so the lock is complete) (napi-rs CLI, TypeScript, ioredis),
# builds the native addon, checks that the generated native.d.ts and native.js match the
# committed ones,
# type-checks the TypeScript example, and runs `node --test` against redis-servers the
# tests start themselves.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/ensure-redis.sh
cargo build -q -p delayq-cli
cd bindings-node
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  npm install --no-audit --no-fund
fi
npm run build:debug
for generated in native.d.ts native.js; do
  git diff --exit-code -- "$generated" || { echo "$generated differs from the build: commit the generated file" >&2; exit 1; }
done
npm run typecheck
node --test test/*.test.js test/*.test.mjs
