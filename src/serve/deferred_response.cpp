#include "serve/deferred_response.h"

namespace kiln::serve {

void respond_when_done(http::Exchange& ex, const std::shared_ptr<ChoiceSet>& set, const ResponseBuilder& build) {
  ex.on_client_gone([set] { set->cancel(); });
  std::vector<ChoiceOutput> out(set->size());
  while (!set->poll(kPollInterval, [&](size_t i, Generation::Chunk& c) {
    out[i].text += c.text;
    for (auto& t : c.tokens) out[i].tokens.push_back(std::move(t));
  })) {
  }
  if (const std::string e = set->error(); !e.empty()) return send_error(ex, {set->error_status(), e});
  ex.respond(build(*set, out));
}

void respond_when_done(http::Exchange& ex, const std::shared_ptr<ChoiceSet>& set, const BodyBuilder& build) {
  respond_when_done(ex, set, ResponseBuilder([&build](const ChoiceSet& s, std::vector<ChoiceOutput>& out) {
                      return json_response(build(s, out));
                    }));
}

}  // namespace kiln::serve
