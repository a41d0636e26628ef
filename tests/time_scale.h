// Time bounds of tests on slow builds. A test's waits and deadlines (an idle timeout, a residency
// timeout, "within 5 s") assume a release build; under ThreadSanitizer the same code runs about ten
// times slower, and the bounds, not the behaviour, would fail. Scale waits and bounds with these,
// never what a test checks.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdlib>

namespace kiln::test {

// How many times longer than in a release build the code under test may take: 10 under
// ThreadSanitizer, else 1. KILN_TEST_TIME_SCALE (a number >= 1) overrides it, for a slow machine.
inline double time_scale() {
  static const double scale = [] {
    if (const char* s = std::getenv("KILN_TEST_TIME_SCALE")) {
      char* end = nullptr;
      const double v = std::strtod(s, &end);
      if (end != s && *end == '\0' && v >= 1) return v;
    }
#if defined(__SANITIZE_THREAD__)
    return 10.0;
#else
    return 1.0;
#endif
  }();
  return scale;
}

// `d` times time_scale().
template <class Rep, class Period>
std::chrono::milliseconds scaled(std::chrono::duration<Rep, Period> d) {
  return std::chrono::milliseconds(static_cast<int64_t>(
      std::ceil(std::chrono::duration<double, std::milli>(d).count() * time_scale())));
}

// Whole seconds `s` times time_scale(), rounded up (for flags such as --residency-timeout).
inline int scaled_seconds(int s) { return static_cast<int>(std::ceil(s * time_scale())); }

}  // namespace kiln::test
