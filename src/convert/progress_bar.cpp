#include "convert/progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace kiln::convert {

ProgressBar::ProgressBar(std::string label, uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), active_(enabled && isatty(STDERR_FILENO)) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(uint64_t done, const std::string& item) {
  if (!active_) return;
  constexpr int kWidth = 30;
  const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, ' ');
  std::fprintf(stderr, "\r%s [%s] %3d%% %-40.40s", label_.c_str(), bar.c_str(), static_cast<int>(frac * 100), item.c_str());
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!active_) return;
  std::fprintf(stderr, "\n");
  active_ = false;
}

}  // namespace kiln::convert
