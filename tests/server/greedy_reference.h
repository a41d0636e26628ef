// The reference that server and chat outputs are compared with: greedy decoding straight from a
// Context, one sequence, no batching, no HTTP.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llm/model.h"

namespace kiln::test {

// One greedy step: the chosen token, its text, and the log-softmax of every token's logit.
struct GreedyStep {
  int32_t token = -1;
  std::string piece;
  std::vector<double> logprobs;  // [n_vocab]
};

// Up to n greedy steps after the prompt `ids` (stops before an end-of-generation token), in a
// context of 1024 cells on one thread.
std::vector<GreedyStep> greedy_reference(std::shared_ptr<const Model> model, const std::vector<int32_t>& ids, int n);

// The steps' pieces, one string each, and all of them joined.
std::vector<std::string> pieces_of(const std::vector<GreedyStep>& steps);
std::string text_of(const std::vector<GreedyStep>& steps);

}  // namespace kiln::test
