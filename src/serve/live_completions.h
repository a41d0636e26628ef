// LiveCompletions: the chat completions in flight, by their response id, so that
// POST /v1/chat/completions/control can act on one while its answer is generated (llama-server's
// reasoning_control: {"id", "action": "reasoning_end"} ends the reasoning block being written).
// A completion is found from add() until its last choice ends; the registry holds it weakly, so
// it never keeps a response alive. Only its owner controls it: a control request must present the
// API key the completion's request presented (the same Authorization header, or none from both),
// besides knowing the id (128 random bits, make_id). A control request cannot come on the owner's
// own connection while the completion is live (HTTP/1.1 answers a connection's requests in order),
// so the key is what names the owner.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln::serve {

class ChoiceSet;

class LiveCompletions {
 public:
  // What a control request gets back: llama-server's {"success", "message"}.
  struct Outcome {
    bool success = false;
    std::string message;  // why not, when !success
  };

  // Registers the completion `id` (unique per server), owned by requests that present
  // `authorization` (the Authorization header's value, empty when none). `armed`: the request asked
  // reasoning_control and its template has a reasoning block to end.
  void add(const std::string& id, const std::string& authorization, const std::shared_ptr<ChoiceSet>& set,
           bool armed);
  // Performs `action` on the live completion `id` for a request that presents `authorization`.
  // "reasoning_end" asks every choice to end the reasoning block being counted before its next
  // token; a choice not inside a block (none opened yet, or already closed) is left as it is, and
  // the outcome is still a success (as llama-server). Another owner's completion is answered as an
  // unknown id.
  Outcome control(const std::string& id, const std::string& authorization, const std::string& action);

 private:
  struct Entry {
    std::weak_ptr<ChoiceSet> set;
    std::string authorization;
    bool armed = false;
  };
  void prune();  // under mutex_: drops the completions that ended

  std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace kiln::serve
