// Non-streaming answers to generation requests, with disconnect detection.
//
// httplib 0.11 gives a handler no way to see its socket, so a client that goes away from a
// non-streaming request is noticed only when the server writes to it. The answer is therefore
// deferred: the handler first waits up to kKeepaliveInterval; a generation that ended by then is
// answered normally (200 with Content-Length, or the error's own status). Otherwise the response
// becomes chunked (status 200, "application/json; charset=utf-8"): while the generation runs, a
// single space is written every kKeepaliveInterval (JSON allows leading whitespace, so httplib's
// client, curl, and the OpenAI SDKs parse the body unchanged), and the final JSON follows. A write
// that fails means the client has gone: every choice is cancelled and its slot freed (within about
// two intervals: the first write after a close may still be accepted by the kernel). Once bytes
// are sent the status cannot change, so a generation that fails later is reported in the body as
// OpenAI's {"error": {...}} object with status 200.
// The content type carries "; charset=utf-8" on purpose: httplib would compress a plain
// "application/json" body for clients that accept gzip/brotli, holding the spaces in the
// compressor where they never reach the socket.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "serve/api_json.h"
#include "serve/choice_set.h"

namespace httplib {
struct Response;
}

namespace kiln::serve {

inline constexpr std::chrono::milliseconds kKeepaliveInterval{500};

// Builds the body from the choices' gathered output once every choice ended without error.
using BodyBuilder = std::function<json(const ChoiceSet&, std::vector<ChoiceOutput>&)>;

// Answers `res` with build(...) when `set` ends (see above); cancels it when the client goes.
void respond_when_done(httplib::Response& res, std::shared_ptr<ChoiceSet> set, BodyBuilder build);

}  // namespace kiln::serve
