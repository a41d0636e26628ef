// Small text helpers for the chat-format code: trimming, comparing two renders, and scanning JSON
// that a model is still writing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln::chat {

// Without leading and trailing ASCII whitespace.
std::string trim(std::string_view s);
std::string_view trim_view(std::string_view s);

// Two texts split into their common prefix, the differing middles and their common suffix.
struct DiffSplit {
  std::string prefix, left, right, suffix;
};
DiffSplit diff_split(std::string_view left, std::string_view right);

// Where the JSON value at the start of `s` (after any whitespace) ends.
struct JsonScan {
  enum class Status { Complete, Incomplete, Invalid };
  Status status = Status::Invalid;
  size_t end = 0;  // Complete: one past the value; Incomplete: s.size()
};
// Scans one JSON value (object, array, string, number, true/false/null). A number at the very end
// of `s` is Incomplete (more digits may follow).
JsonScan scan_json(std::string_view s);

// How many characters at the end of `text` begin `marker` without completing it (0 if none): the
// part of a streamed text that must wait, as it may be the start of the marker.
size_t partial_marker_suffix(std::string_view text, std::string_view marker);

}  // namespace kiln::chat
