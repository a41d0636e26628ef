#!/usr/bin/env bash
# Runs one libFuzzer target of fuzz/ under ASan+UBSan for SECONDS (default 60), from its seeds.
# Fails on any crash, sanitizer report, leak or timeout. Needs clang and libFuzzer
# (scripts/deps.sh test). Targets:
#   gguf          the GGUF reader; seeds: the malformed corpus test_gguf writes, the small GGUFs of
#                 the test data (tests/data, and build/test-data once tools/fixtures/make_test_data.py
#                 has made it)
#   http_request  the HTTP request parser and the JSON request parsing; seeds: fuzz/seeds/http_request;
#                 reads the Qwen2 test model (build/test-data/models: make_test_data.py first)
#   json_schema   the JSON-schema converter (and the GBNF parser on what it writes); seeds:
#                 fuzz/seeds/json_schema
#   gbnf          the GBNF parser and its checks; seeds: fuzz/seeds/gbnf
#   audio_decode  audio decoding (libsndfile, libsoxr); seeds: fuzz/seeds/audio_decode (small WAV
#                 and FLAC files) and the audio of tests/data/audio
# Usage: fuzz/run_fuzz.sh TARGET [SECONDS]
#   KILN_FUZZ_BUILD_DIR  build folder of the fuzz preset (default: build/fuzz)
#   KILN_CORPUS_SEED     gguf: folder of seed inputs (default: build/*/fuzz-corpus/gguf)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: fuzz/run_fuzz.sh gguf|http_request|json_schema|gbnf|audio_decode [SECONDS]}
seconds=${2:-60}
build=${KILN_FUZZ_BUILD_DIR:-build/fuzz}

cmake --preset fuzz -B "$build" >/dev/null
cmake --build "$build" --target "${target}_fuzz" -j "$(nproc)"

work="$build/fuzz-corpus-work/$target"
mkdir -p "$work"
case "$target" in
  gguf)
    # The malformed corpus from the tests (newest one found), plus the test data's GGUFs under 64 KiB
    # (larger inputs slow every execution down without reaching new code).
    seed=${KILN_CORPUS_SEED:-$(ls -dt build/*/fuzz-corpus/gguf 2>/dev/null | head -n1 || true)}
    if [[ -n "$seed" && -d "$seed" ]]; then
      cp -n "$seed"/* "$work"/ 2>/dev/null || true
    else
      echo "run_fuzz: no seed corpus found (run test_gguf first to write build/<dir>/fuzz-corpus/gguf)" >&2
    fi
    find tests/data tests/*/data build/test-data -name '*.gguf' -size -64k -exec cp -n {} "$work"/ \; 2>/dev/null || true
    ;;
  http_request | json_schema | gbnf)
    cp -n "fuzz/seeds/$target"/* "$work"/
    ;;
  audio_decode)
    cp -n fuzz/seeds/audio_decode/* tests/data/audio/*.wav tests/data/audio/*.mp3 "$work"/
    ;;
  *)
    echo "run_fuzz: unknown target '$target'" >&2
    exit 2
    ;;
esac
echo "run_fuzz: $target: $(ls "$work" | wc -l) seed inputs in $work, fuzzing for ${seconds}s"

artifacts="$build/fuzz-artifacts/$target/"
mkdir -p "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# libFuzzer exits non-zero on a crash, sanitizer report, leak, timeout or out-of-memory.
"$build/${target}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts" "$work"
