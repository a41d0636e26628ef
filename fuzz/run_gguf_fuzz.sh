#!/usr/bin/env bash
# Fuzzes the GGUF reader (fuzz/gguf_fuzz.cpp) with libFuzzer under ASan+UBSan for SECONDS
# (default 60), seeded with the malformed corpus that test_gguf writes and the small GGUFs of the
# test data (tests/data, and build/test-data when tools/fixtures/make_test_data.py has made it).
# Fails on any crash, sanitizer report, leak or timeout. Needs clang and libFuzzer (scripts/deps.sh test).
# Usage: fuzz/run_gguf_fuzz.sh [SECONDS]
#   KILN_FUZZ_BUILD_DIR  build folder of the fuzz preset (default: build/fuzz)
#   KILN_CORPUS_SEED     folder of seed inputs (default: build/*/fuzz-corpus/gguf, written by test_gguf)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=${KILN_FUZZ_BUILD_DIR:-build/fuzz}

cmake --preset fuzz -B "$build" >/dev/null
cmake --build "$build" --target gguf_fuzz -j "$(nproc)"

# Seeds: the malformed corpus from the tests (newest one found), plus the fixture GGUFs under 64 KiB
# (larger inputs slow every execution down without reaching new code).
seed=${KILN_CORPUS_SEED:-$(ls -dt build/*/fuzz-corpus/gguf 2>/dev/null | head -n1 || true)}
work="$build/fuzz-corpus-work/gguf"
mkdir -p "$work"
if [[ -n "$seed" && -d "$seed" ]]; then
  cp -n "$seed"/* "$work"/ 2>/dev/null || true
else
  echo "run_gguf_fuzz: no seed corpus found (run test_gguf first to write build/<dir>/fuzz-corpus/gguf)" >&2
fi
find tests/data tests/*/data build/test-data -name '*.gguf' -size -64k -exec cp -n {} "$work"/ \; 2>/dev/null || true
echo "run_gguf_fuzz: $(ls "$work" | wc -l) seed inputs in $work, fuzzing for ${seconds}s"

artifacts="$build/fuzz-artifacts/gguf/"
mkdir -p "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# libFuzzer exits non-zero on a crash, sanitizer report, leak, timeout or out-of-memory.
"$build/gguf_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts" "$work"
