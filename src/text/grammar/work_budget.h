// WorkBudget: the work one grammar matcher may do for one token, so that no grammar can make a
// token cost seconds (issue 30: `root ::= "a"?` repeated 5,000 times cost 38 s a token, since every
// optional item can start the text and each one's parse position is merged with every other's).
// The matcher and its constraint count units as they go (a unit is about a nanosecond of work: one
// parse position examined or compared, a few for one expanded or interned); past the limit, or
// once the interrupt flag is raised (a cancelled request, a server stopping), spend() answers false
// and the caller stops and reports the error.
// Thread-safety: none; one per matcher. The interrupt flag may be raised from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace kiln::grammar {

class WorkBudget {
 public:
  // Units one token may cost: about half a second of grammar work on a 2020s desktop core.
  // Grammars people write use far less: a JSON schema of 200 optional properties takes 27 million
  // units (40 ms) at its costliest token on Qwen2's 152k-token vocabulary, 5% of it.
  static constexpr uint64_t kDefaultLimit = 500'000'000;

  explicit WorkBudget(uint64_t limit = kDefaultLimit) : limit_(limit) {}

  // Raised (from any thread), the next check stops the work as if the limit had passed. Non-owning:
  // the flag must outlive this budget's uses; null: none.
  void set_interrupt(const std::atomic<bool>* flag) { interrupt_ = flag; }

  // Counts `units`; false once the limit has passed or the flag was seen raised (and from then
  // on, until restart()).
  bool spend(uint64_t units) {
    const uint64_t before = used_;
    used_ += units;
    if (used_ > limit_) return false;
    // The flag is read once per 64Ki units: a relaxed load is cheap, but not per unit.
    if (interrupt_ != nullptr && (before >> 16) != (used_ >> 16) &&
        interrupt_->load(std::memory_order_relaxed)) {
      used_ = limit_ + 1;
      interrupted_ = true;
      return false;
    }
    return true;
  }
  bool exhausted() const { return used_ > limit_; }
  bool interrupted() const { return interrupted_; }
  // A new token: nothing spent.
  void restart() {
    used_ = 0;
    interrupted_ = false;
  }
  uint64_t used() const { return used_; }
  uint64_t limit() const { return limit_; }
  // What an exhausted budget means, for the request's error.
  std::string message() const {
    if (interrupted_) return "grammar: the work was interrupted (the request was cancelled)";
    return "grammar: one token needs more than " + std::to_string(limit_) +
           " units of grammar work (kiln's limit per token); the grammar lets too many items start at "
           "the same place (long runs of optional items or alternatives with the same start)";
  }

 private:
  uint64_t limit_;
  uint64_t used_ = 0;
  bool interrupted_ = false;
  const std::atomic<bool>* interrupt_ = nullptr;
};

}  // namespace kiln::grammar
