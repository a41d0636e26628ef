#include "serve/live_completions.h"

#include "serve/choice_set.h"

namespace kiln::serve {

void LiveCompletions::add(const std::string& id, const std::string& authorization,
                          const std::shared_ptr<ChoiceSet>& set, bool armed) {
  std::lock_guard lock(mutex_);
  prune();
  entries_[id] = Entry{set, authorization, armed};
}

LiveCompletions::Outcome LiveCompletions::control(const std::string& id, const std::string& authorization,
                                                  const std::string& action) {
  // ref: llama-server's SERVER_TASK_TYPE_CONTROL (server-context.cpp): the id first, then the
  // action, then whether the completion was armed.
  std::shared_ptr<ChoiceSet> set;
  bool armed = false;
  {
    std::lock_guard lock(mutex_);
    prune();
    if (auto it = entries_.find(id); it != entries_.end() && it->second.authorization == authorization) {
      set = it->second.set.lock();
      armed = it->second.armed;
    }
  }
  if (set == nullptr || !set->live()) return {false, "no active completion for this id"};
  if (action != "reasoning_end") return {false, "unknown control action"};
  if (!armed) return {false, "reasoning control not enabled for this completion"};
  set->end_reasoning();
  return {true, ""};
}

void LiveCompletions::prune() {
  std::erase_if(entries_, [](const auto& e) {
    const auto set = e.second.set.lock();
    return set == nullptr || !set->live();
  });
}

}  // namespace kiln::serve
