// Wall-clock timing of the commands' phases (prompt, generation) for their timing lines.
#pragma once

#include <chrono>

namespace kiln::cli {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace kiln::cli
