#!/usr/bin/env bash
# ASan+UBSan build of kiln running the unit and fault tests, then the GGUF reader fuzzer for a
# bounded time over the corpus the tests write.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
# Only the binaries of the labels run below and the `kiln` they start (it also makes the test
# data), not the conformance and server tests.
scripts/build.sh sanitize tests_unit tests_fault kiln_cli
/usr/bin/python3 tools/fixtures/make_test_data.py --kiln build/sanitize/kiln
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/sanitize --output-on-failure -j "$(nproc)" -L 'unit|fault'
# The GGUF reader under libFuzzer (clang, ASan+UBSan), seeded with the malformed corpus test_gguf
# just wrote into build/sanitize.
KILN_CORPUS_SEED=build/sanitize/fuzz-corpus/gguf fuzz/run_gguf_fuzz.sh "${KILN_FUZZ_SECONDS:-60}"
