#!/usr/bin/env bash
# ThreadSanitizer build of kiln running the tests of memory residency, many models in one server,
# idle sleep and the cross-process arbiter (issue 11), and weights prepared on several threads: the
# code where threads share residency managers, arenas, engines, the device token and a weights
# buffer. Not part of CI (.ci/run): its build alone would take CI past its time budget; run it
# after changing threads or locks.
# Usage: scripts/tsan.sh [CTEST_REGEX]   (default: the tests below)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
scripts/build.sh tsan test_core test_runtime test_llm test_server kiln_cli
/usr/bin/python3 tools/fixtures/make_test_data.py --kiln build/tsan/kiln
tests='^(Residency|ResidencyManager|ThreadPool|IndexThreads|DeviceWeights|DeviceRegistry|Arbiter|SimLedger|SharedSimDevice|ContextTest|'
tests+='ManyModels|ModelCatalog|Devices/IdleSleep|IdleSleepWake|ServerOnSimDevice|ServerConcurrency|ArbiterProcesses)'
# die_after_fork=0: the arbiter tests fork children that start threads (an Arbiter's monitor);
# each child is a process of its own, whose locks the test controls.
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:die_after_fork=0 \
  ctest --test-dir build/tsan --output-on-failure -j "$(nproc)" -R "${1:-$tests}"
