#!/usr/bin/env bash
# ASan+UBSan build of kiln running the unit, fault and server tests, the C API's and the Python
# package's tests, the Vulkan backend's op and server tests with the driver (lavapipe) in the
# process, then the fuzzers for a bounded time
# (KILN_FUZZ_SECONDS in all, split between them): the GGUF reader over the corpus the tests write,
# the HTTP request parser with the JSON request parsing, the JSON-schema converter and the GBNF
# parser.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
# Only the binaries of the labels run below and the `kiln` they start (it also makes the test
# data), not the conformance tests.
scripts/build.sh sanitize tests_unit tests_fault tests_server tests_vulkan kiln_cli kiln_shared
/usr/bin/python3 tools/fixtures/make_test_data.py --kiln build/sanitize/kiln
# AddressSanitizer makes mlock() a no-op, so the two --mlock tests, which read VmLck, run in the
# release suite only.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/sanitize --output-on-failure -j "$(nproc)" -L 'unit|fault' \
  -E '^(WeightOptions\.MlockLocksTheWeightsWhileResident|Cli\.NoMmapAndMlockGiveTheSameTextAndAFailedLockWarnsOnce)$'
# The server group (HTTP, engine, router, arbiter processes, the OpenAI SDK client): where threads,
# sockets and untrusted bytes meet. ServeSleep.CommandSleepsWakesAndExits measures the RSS a
# sleeping server gives back, which ASan's quarantine keeps: it runs in the release suite only.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/sanitize --output-on-failure -j "$(nproc)" -L server \
  -E '^ServeSleep\.CommandSleepsWakesAndExits$'
# The C API: its C test and example compiled with the sanitizers against the sanitized
# libkiln.so (every function's errors, evict/restore, the arbiter, images), and the Python package
# with the ASan and UBSan runtimes preloaded into CPython (leaks unchecked there: the interpreter
# keeps its own to the end).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  KILN_API_TEST_CFLAGS="-fsanitize=address,undefined" \
  ctest --test-dir build/sanitize --output-on-failure -R '^api\.(c_api|exports)$'
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  KILN_PYTHON_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
  ctest --test-dir build/sanitize --output-on-failure -R '^api\.python$'
# The Vulkan backend with lavapipe in the process: every op against the CPU and a server of 8
# streams (no suppression: the process's one Vulkan instance keeps the driver's memory reachable,
# backends/vulkan/vulkan_instance.h).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/sanitize --output-on-failure -j "$(nproc)" -L vulkan -R '^Vulkan(Ops|Server)\.'
# The fuzzers under libFuzzer (clang, ASan+UBSan); the GGUF reader is seeded with the malformed
# corpus test_gguf just wrote into build/sanitize.
fuzz_seconds=${KILN_FUZZ_SECONDS:-60}
KILN_CORPUS_SEED=build/sanitize/fuzz-corpus/gguf fuzz/run_fuzz.sh gguf $((fuzz_seconds / 5))
fuzz/run_fuzz.sh http_request $((fuzz_seconds / 5))
fuzz/run_fuzz.sh json_schema $((fuzz_seconds / 5))
fuzz/run_fuzz.sh audio_decode $((fuzz_seconds / 5))
fuzz/run_fuzz.sh gbnf $((fuzz_seconds - 4 * (fuzz_seconds / 5)))
