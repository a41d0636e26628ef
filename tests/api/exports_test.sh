#!/usr/bin/env bash
# libkiln.so exports the C API's kiln_* functions and no other symbol (`nm -D --defined-only`).
# Usage: exports_test.sh LIBKILN_SO
set -euo pipefail
symbols=$(nm -D --defined-only "$1" | awk '{print $NF}')
others=$(grep -v '^kiln_' <<<"$symbols" || true)
if [[ -n "$others" ]]; then
  echo "libkiln.so exports symbols other than kiln_*:" >&2
  echo "$others" | head -n 20 >&2
  exit 1
fi
count=$(grep -c '^kiln_' <<<"$symbols")
grep -qx kiln_generate <<<"$symbols" || { echo "kiln_generate is not exported" >&2; exit 1; }
echo "libkiln.so exports $count kiln_* symbols and nothing else"
