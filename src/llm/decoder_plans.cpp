#include "llm/decoder_plans.h"

#include <algorithm>

namespace kiln {

DecoderPlan* DecoderPlans::find(const DecoderGraphSpec& spec, Generations gen) {
  std::erase_if(entries_, [&](const Entry& e) { return e.gen != gen; });
  for (Entry& e : entries_) {
    if (e.spec != spec) continue;
    e.last_use = ++clock_;
    return e.plan.get();
  }
  return nullptr;
}

DecoderPlan& DecoderPlans::insert(const DecoderGraphSpec& spec, Generations gen,
                                  std::unique_ptr<DecoderPlan> plan) {
  if (entries_.size() >= kMaxEntries) {
    const auto lru = std::min_element(entries_.begin(), entries_.end(),
                                      [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
    entries_.erase(lru);
  }
  entries_.push_back(Entry{spec, gen, ++clock_, std::move(plan)});
  return *entries_.back().plan;
}

}  // namespace kiln
