#!/usr/bin/env bash
# ThreadSanitizer build of kiln running the whole server group (HTTP, engine and its KV pool,
# router, idle sleep, arbiter processes, the OpenAI SDK client) and the unit tests of the code
# where threads share residency managers, arenas, thread pools and a weights buffer. Not part of
# CI (.ci/run): its build alone would take CI past its time budget; run it after changing threads
# or locks. Time bounds scale by tests/time_scale.h (10x under TSan).
# Usage: scripts/tsan.sh [CTEST_REGEX]   (default: the tests below)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
scripts/build.sh tsan test_core test_runtime test_llm tests_server kiln_cli
/usr/bin/python3 tools/fixtures/make_test_data.py --kiln build/tsan/kiln
# die_after_fork=0: the arbiter tests fork children that start threads (an Arbiter's monitor);
# each child is a process of its own, whose locks the test controls.
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:die_after_fork=0
if (($# > 0)); then
  ctest --test-dir build/tsan --output-on-failure -j "$(nproc)" -R "$1"
  exit
fi
unit='^(Residency|ResidencyManager|ThreadPool|IndexThreads|DeviceWeights|DeviceRegistry|Arbiter|SimLedger|'
unit+='SharedSimDevice|ContextTest)'
ctest --test-dir build/tsan --output-on-failure -j "$(nproc)" -L unit -R "$unit"
# Left to the release suite: ServeSleep.CommandSleepsWakesAndExits measures the RSS a sleeping
# server gives back, which TSan's shadow memory swamps (as under ASan, scripts/sanitize.sh), and
# grammar.json_schema_outputs runs `kiln run` once per schema, one process after another (no
# threads shared; 40 s in release, past its 10-minute limit under TSan).
ctest --test-dir build/tsan --output-on-failure -j "$(nproc)" -L server \
  -E '^(ServeSleep\.CommandSleepsWakesAndExits|grammar\.json_schema_outputs)$'
