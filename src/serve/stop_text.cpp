#include "serve/stop_text.h"

#include <algorithm>

namespace kiln::serve {

StopText::StopText(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
  for (const auto& s : stops_) max_stop_ = std::max(max_stop_, s.size());
}

bool StopText::append(const std::string& piece) {
  if (stopped_) return true;
  const size_t old_size = text_.size();
  text_ += piece;
  // A stop string can only complete inside the new bytes plus the max_stop_ - 1 bytes before them.
  const size_t from = old_size >= max_stop_ ? old_size - max_stop_ + 1 : 0;
  size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, text_.find(s, from));
  if (cut == std::string::npos) return false;
  text_.resize(cut);
  stopped_ = true;
  return true;
}

std::string StopText::take(bool flush) {
  size_t end = text_.size();
  if (!flush && !stopped_) {
    // Hold back the longest suffix that is a proper prefix of some stop string.
    size_t hold = 0;
    for (const auto& s : stops_) {
      for (size_t n = std::min(s.size() - 1, text_.size() - sent_); n > hold; --n) {
        if (text_.compare(text_.size() - n, n, s, 0, n) == 0) {
          hold = n;
          break;
        }
      }
    }
    end -= hold;
    end -= incomplete_utf8_tail(text_.substr(sent_, end - sent_));
  }
  if (end <= sent_) return {};
  std::string out = text_.substr(sent_, end - sent_);
  sent_ = end;
  return out;
}

size_t incomplete_utf8_tail(const std::string& s) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) need = 2;
    else if ((c & 0xF0) == 0xE0) need = 3;
    else if ((c & 0xF8) == 0xF0) need = 4;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace kiln::serve
