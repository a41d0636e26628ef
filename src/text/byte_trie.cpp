#include "text/byte_trie.h"

#include <algorithm>

#include "core/check.h"

namespace kiln::text {

ByteTrie::ByteTrie(std::vector<std::pair<std::string_view, int32_t>> entries) {
  // Sorted by key (std::string_view compares bytes as unsigned char), the keys below one node
  // form one contiguous range and each child's keys a contiguous sub-range.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<std::string_view, int32_t>> keys;
  keys.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i + 1 < entries.size() && entries[i + 1].first == entries[i].first) continue;  // the last wins
    keys.push_back(entries[i]);
  }
  // Breadth-first: node q covers keys [lo, hi) that share their first `depth` bytes, and its edges
  // are appended together, so each node's edges are contiguous.
  struct Range {
    uint32_t lo, hi, depth;
  };
  KILN_ASSERT(keys.size() < UINT32_MAX, "too many keys for a ByteTrie");
  std::vector<Range> nodes = {{0, static_cast<uint32_t>(keys.size()), 0}};
  values_.push_back(-1);
  for (size_t q = 0; q < nodes.size(); ++q) {
    auto [lo, hi, depth] = nodes[q];
    first_edge_.push_back(static_cast<uint32_t>(edge_bytes_.size()));
    if (lo < hi && keys[lo].first.size() == depth) values_[q] = keys[lo++].second;
    while (lo < hi) {
      const auto byte = static_cast<uint8_t>(keys[lo].first[depth]);
      uint32_t end = lo + 1;
      while (end < hi && static_cast<uint8_t>(keys[end].first[depth]) == byte) ++end;
      KILN_ASSERT(nodes.size() < kNoNode, "too many nodes for a ByteTrie");
      edge_bytes_.push_back(byte);
      edge_nodes_.push_back(static_cast<uint32_t>(nodes.size()));
      nodes.push_back({lo, end, depth + 1});
      values_.push_back(-1);
      lo = end;
    }
  }
  first_edge_.push_back(static_cast<uint32_t>(edge_bytes_.size()));
}

uint32_t ByteTrie::child(uint32_t node, uint8_t byte) const {
  const auto begin = edge_bytes_.begin() + first_edge_[node];
  const auto end = edge_bytes_.begin() + first_edge_[node + 1];
  const auto it = std::lower_bound(begin, end, byte);
  return it != end && *it == byte ? edge_nodes_[it - edge_bytes_.begin()] : kNoNode;
}

size_t ByteTrie::walk_length(std::string_view s) const {
  uint32_t node = root();
  size_t n = 0;
  while (n < s.size() && (node = child(node, static_cast<uint8_t>(s[n]))) != kNoNode) ++n;
  return n;
}

}  // namespace kiln::text
