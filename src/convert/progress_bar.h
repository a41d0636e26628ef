// A one-line progress bar on stderr, drawn only when stderr is a terminal.
// Not thread-safe: one thread updates it.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::convert {

class ProgressBar {
 public:
  // `enabled` false (or stderr not a terminal) makes every call a no-op.
  ProgressBar(std::string label, uint64_t total, bool enabled);
  ~ProgressBar();
  void update(uint64_t done, const std::string& item);
  void finish();

 private:
  std::string label_;
  uint64_t total_;
  bool active_;
};

}  // namespace kiln::convert
