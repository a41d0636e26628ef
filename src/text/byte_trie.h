// ByteTrie: a trie over byte strings in flat arrays (a node's children sorted by byte), for the
// longest-match walks of the UGM tokenizer: about 13 bytes per node instead of a map per node.
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::text {

class ByteTrie {
 public:
  static constexpr uint32_t kNoNode = UINT32_MAX;

  ByteTrie() : ByteTrie(std::vector<std::pair<std::string_view, int32_t>>{}) {}
  // `entries`: (key, value >= 0). Of equal keys the last one wins. The keys' bytes are copied into
  // the structure; the views need only live through the call.
  explicit ByteTrie(std::vector<std::pair<std::string_view, int32_t>> entries);

  static constexpr uint32_t root() { return 0; }
  // The child of `node` along `byte`, or kNoNode.
  uint32_t child(uint32_t node, uint8_t byte) const;
  // The value of the key that ends at `node`, or -1 when none does.
  int32_t value(uint32_t node) const { return values_[node]; }
  // How many leading bytes of `s` a walk from the root follows, whether or not a key ends there.
  size_t walk_length(std::string_view s) const;

 private:
  std::vector<int32_t> values_;       // per node
  std::vector<uint32_t> first_edge_;  // node i's edges are [first_edge_[i], first_edge_[i + 1])
  std::vector<uint8_t> edge_bytes_;   // sorted within a node
  std::vector<uint32_t> edge_nodes_;
};

}  // namespace kiln::text
