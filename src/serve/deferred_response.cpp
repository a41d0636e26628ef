#include "serve/deferred_response.h"

#include "serve/http.h"

namespace kiln::serve {
namespace {

struct Pending {
  std::shared_ptr<ChoiceSet> set;
  std::vector<ChoiceOutput> out;
  BodyBuilder build;

  // Waits at most `timeout`; true when every choice ended.
  bool wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const bool done = set->poll(timeout, [&](size_t i, Generation::Chunk& c) {
        out[i].text += c.text;
        for (auto& t : c.tokens) out[i].tokens.push_back(std::move(t));
      });
      if (done) return true;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return false;
      timeout = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    }
  }
};

json error_body(const std::string& message) {
  return {{"error", {{"message", message}, {"type", "server_error"}, {"code", 500}}}};
}

}  // namespace

void respond_when_done(httplib::Response& res, std::shared_ptr<ChoiceSet> set, BodyBuilder build) {
  auto p = std::make_shared<Pending>();
  p->out.resize(set->size());
  p->set = std::move(set);
  p->build = std::move(build);
  if (p->wait(kKeepaliveInterval)) {
    if (const std::string e = p->set->error(); !e.empty()) return send_error(res, {500, e});
    return send_json(res, p->build(*p->set, p->out));
  }
  res.set_chunked_content_provider(
      "application/json; charset=utf-8",
      [p](size_t, httplib::DataSink& sink) {
        if (!p->wait(kKeepaliveInterval)) {
          static const char kSpace = ' ';
          if (sink.write(&kSpace, 1)) return true;
          p->set->cancel();
          return false;
        }
        const std::string e = p->set->error();
        const std::string body =
            e.empty() ? p->build(*p->set, p->out).dump(-1, ' ', false, json::error_handler_t::replace)
                      : error_body(e).dump();
        sink.write(body.data(), body.size());
        sink.done();
        return true;
      },
      [p](bool) { p->set->cancel(); });
}

}  // namespace kiln::serve
