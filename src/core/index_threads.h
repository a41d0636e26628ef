// for_each_index_on_threads: a one-off parallel loop on threads started for the call (file-level
// work such as quantizing a tensor or preparing a model's weights at load; the compute graphs run on
// runtime/thread_pool.h's persistent pool instead).
#pragma once

#include <cstdint>
#include <functional>

namespace kiln {

// Calls fn(i) exactly once for every i in [0, n), on min(n_threads, n) threads: the caller and
// threads started for the call, joined before it returns. Each thread claims the lowest unclaimed
// index until none is left, so a thread that the machine delays takes fewer. n_threads <= 0: every
// hardware thread. Thread-safety: fn runs concurrently for distinct i; whatever it writes is
// visible to the caller when this returns.
void for_each_index_on_threads(int64_t n, int n_threads, const std::function<void(int64_t i)>& fn);

}  // namespace kiln
