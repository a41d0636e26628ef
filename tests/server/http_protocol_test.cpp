// The HTTP layer against hostile and unusual clients, over raw loopback sockets, with the server
// in-process (the qwen2 fixture): JSON nested to crash a recursive parser, request smuggling
// (ambiguous framing, folded headers), header floods, pipelining, missing lengths, chunked
// bodies, Expect: 100-continue, the body limit, head and body deadlines, CORS, out-of-range
// integers, and the OpenAI error shape of every refusal. Each test ends by checking that the
// server still answers a normal request.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "in_process_server.h"
#include "serve/server.h"
#include "serve_process.h"

namespace kiln::serve {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::RawResponse;
using test::RawSocket;

constexpr int kHeadTimeoutMs = 600;  // the suite's server: head deadline
constexpr int kIoTimeoutS = 1;       // body deadline and write timeout
constexpr size_t kMaxBody = 256 << 10;

std::shared_ptr<const Model> model() { return test::qwen2_model(); }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string get(const std::string& path, const std::string& extra_headers = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers + "\r\n";
}

std::string post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  return "POST " + path +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}

// The message of an OpenAI-shaped error body; empty (and a test failure) when it is not one.
std::string error_message(const RawResponse& r) {
  std::string message;
  EXPECT_TRUE(test::is_openai_error(r.body, &message)) << r.head << r.body;
  return message;
}

class HttpProtocolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions o;
    o.n_parallel = 2;
    o.queue_limit = 4;
    o.n_threads = 2;
    o.context.n_ctx = 512;
    o.head_timeout_ms = kHeadTimeoutMs;
    o.timeout_seconds = kIoTimeoutS;
    o.max_body = kMaxBody;
    server_ = test::start_server(o, model(), &port_).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    delete server_;  // stops it
  }

  // One request on a fresh connection; its response (status 0 when none came).
  static RawResponse exchange(const std::string& request, std::chrono::milliseconds timeout = 10s) {
    RawSocket s(port_);
    EXPECT_TRUE(s.connected());
    EXPECT_TRUE(s.send_all(request));
    return s.read_response(timeout).value_or(RawResponse{});
  }

  // A short completion still works.
  static void expect_serves(const char* after) {
    const RawResponse r = exchange(
        post("/v1/completions", json{{"prompt", "Hello"}, {"max_tokens", 3}, {"temperature", 0}}.dump()));
    ASSERT_EQ(r.status, 200) << after << ": " << r.head << r.body;
    EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], 3) << after;
  }

  static Server* server_;
  static int port_;
};
Server* HttpProtocolTest::server_ = nullptr;
int HttpProtocolTest::port_ = 0;

// A chat message holding JSON nested 35,000 deep (70 KB) used to overflow the stack (SIGSEGV) on
// its way to the template. Every place a client can nest is refused with a 400 naming the limit.
TEST_F(HttpProtocolTest, DeepJsonIsRefusedNotACrash) {
  const std::string deep = std::string(35'000, '[') + std::string(35'000, ']');
  const std::string user = R"({"role": "user", "content": "x"})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": )" + deep + "}]}"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "x": )" + deep + "}]}]}"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x", "name": )" + deep + "}]}"},
      {"/v1/chat/completions", R"({"messages": )" + deep + "}"},
      {"/apply-template", R"({"messages": [{"role": "user", "content": "x", "name": )" + deep + "}]}"},
      {"/v1/completions", R"({"prompt": "x", "stop": )" + deep + "}"},
      {"/tokenize", R"({"content": )" + deep + "}"},
  };
  for (const auto& [path, body] : cases) {
    const RawResponse r = exchange(post(path, body));
    ASSERT_EQ(r.status, 400) << path << ": " << r.head << r.body;
    EXPECT_NE(error_message(r).find("deeper than 512"), std::string::npos) << r.body;
  }
  // Within the bound, a deep value reaches the template (as a message field) and renders.
  const std::string nested = std::string(500, '[') + std::string(500, ']');
  const RawResponse ok = exchange(
      post("/apply-template", R"({"messages": [{"role": "user", "content": "x", "name": )" + nested + "}]}"));
  EXPECT_EQ(ok.status, 200) << ok.body;
  expect_serves("deep JSON");
}

// Ten requests in one write get ten answers, in order (they used to get one).
TEST_F(HttpProtocolTest, PipelinedRequestsAreAllAnsweredInOrder) {
  RawSocket s(port_);
  ASSERT_TRUE(s.connected());
  std::string burst;
  for (int i = 0; i < 10; ++i) burst += get("/health");
  burst += post("/tokenize", R"({"content": "Hello"})") + get("/v1/models");
  ASSERT_TRUE(s.send_all(burst));
  for (int i = 0; i < 10; ++i) {
    auto r = s.read_response(10s);
    ASSERT_TRUE(r) << "answer " << i << " missing";
    EXPECT_EQ(r->status, 200) << i;
    EXPECT_EQ(json::parse(r->body)["status"], "ok") << i;
  }
  auto tokens = s.read_response(10s);
  ASSERT_TRUE(tokens);
  EXPECT_EQ(json::parse(tokens->body)["tokens"].get<std::vector<int32_t>>(),
            model()->tokenizer().tokenize("Hello", false, true));
  auto models = s.read_response(10s);
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], model()->name());
  // The connection stays open for more.
  ASSERT_TRUE(s.send_all(get("/health")));
  auto more = s.read_response(10s);
  ASSERT_TRUE(more);
  EXPECT_EQ(more->status, 200);
}

// Requests a proxy in front could read differently from the server (smuggling) and floods: each
// is refused with its status and an OpenAI-shaped error, and the connection is closed at once, so
// the request pipelined behind the bad one is never parsed.
TEST_F(HttpProtocolTest, AmbiguousOrMalformedRequestsAreRefusedAndTheConnectionClosed) {
  const std::string body = R"({"content": "hello"})";
  const std::string n = std::to_string(body.size());
  std::string many_headers;
  for (int i = 0; i < 101; ++i) many_headers += "X-H" + std::to_string(i) + ": v\r\n";
  const std::string base = "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  const std::vector<std::pair<std::string, int>> cases = {
      {base + "Content-Length: " + n + "\r\nContent-Length: 3\r\n\r\n" + body, 400},  // conflicting lengths
      {base + "Content-Length: " + n + "\r\nTransfer-Encoding: chunked\r\n\r\n" + body, 400},  // CL with TE
      {base + "Transfer-Encoding: chunked\r\nContent-Length: " + n + "\r\n\r\n" + body, 400},  // TE with CL
      {base + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},              // unknown coding
      {base + "Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", 400},              // chunked not last
      {base + "Content-Length: -1\r\n\r\n", 400},                                     // negative length
      {base + "Content-Length: 99999999999999999999999\r\n\r\n", 400},                // overflowing
      {base + "X-Folded: a\r\n b\r\nContent-Length: " + n + "\r\n\r\n" + body, 400},  // obs-fold
      {base + "NoColonHere\r\nContent-Length: " + n + "\r\n\r\n" + body, 400},        // no colon
      {base + "Bad Name: x\r\nContent-Length: " + n + "\r\n\r\n" + body, 400},        // space in name
      {"GET /health HTTP/1.1\nHost: 127.0.0.1\n\n", 400},                             // bare LF
      {"GET /health HTTP/1.1\r\n\r\n", 400},                                          // no Host
      {"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},                    // two Hosts
      {"GET /health HTTP/2.0\r\nHost: a\r\n\r\n", 505},                               // version
      {"GET health HTTP/1.1\r\nHost: a\r\n\r\n", 400},                                // target
      {"GET /health HTTP/1.1\r\nHost: a\r\n" + many_headers + "\r\n", 431},           // 101 headers
      {"GET /health HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(40'000, 'a') + "\r\n\r\n",
       431},                                                                       // head size
      {base + "Expect: 200-ok\r\nContent-Length: " + n + "\r\n\r\n" + body, 417},  // Expect
  };
  for (const auto& [request, status] : cases) {
    RawSocket s(port_);
    ASSERT_TRUE(s.connected());
    ASSERT_TRUE(s.send_all(request + get("/health")));
    auto r = s.read_response(10s);
    ASSERT_TRUE(r) << "no answer to:\n" << request.substr(0, 300);
    EXPECT_EQ(r->status, status) << request.substr(0, 300) << "\n->\n" << r->head << r->body;
    EXPECT_FALSE(error_message(*r).empty());
    EXPECT_EQ(r->header("Connection"), "close") << r->head;
    EXPECT_TRUE(s.closed_by_peer(3s)) << "the connection stayed open after:\n" << request.substr(0, 300);
  }
  expect_serves("malformed requests");
}

// A POST without a length is refused at once (411), not after a read timeout, also when the
// client half-closes its side.
TEST_F(HttpProtocolTest, PostWithoutLengthIs411AtOnce) {
  for (bool half_close : {false, true}) {
    RawSocket s(port_);
    ASSERT_TRUE(s.connected());
    const auto t0 = Clock::now();
    ASSERT_TRUE(
        s.send_all("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\r\n"));
    if (half_close) s.shutdown_write();
    auto r = s.read_response(5s);
    ASSERT_TRUE(r) << "half_close " << half_close;
    EXPECT_EQ(r->status, 411);
    EXPECT_LT(seconds_since(t0), 1.0);
    EXPECT_NE(error_message(*r).find("Content-Length"), std::string::npos);
  }
}

// Chunked request bodies are read; Expect: 100-continue gets its 100 before the body is sent, and
// a refusal instead when the body would be refused anyway.
TEST_F(HttpProtocolTest, ChunkedBodiesAndExpectContinue) {
  const auto hello = model()->tokenizer().tokenize("Hello world", false, true);
  {
    const RawResponse r = exchange(
        "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        "7;ext=1\r\n{\"conte\r\n10\r\nnt\": \"Hello worl\r\n2\r\nd\"\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n");
    ASSERT_EQ(r.status, 200) << r.head << r.body;
    EXPECT_EQ(json::parse(r.body)["tokens"].get<std::vector<int32_t>>(), hello);
  }
  {
    RawSocket s(port_);
    ASSERT_TRUE(s.connected());
    const std::string body = R"({"content": "Hello world"})";
    ASSERT_TRUE(
        s.send_all("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n"));
    auto go_on = s.read_response(5s);
    ASSERT_TRUE(go_on);
    EXPECT_EQ(go_on->status, 100);
    ASSERT_TRUE(s.send_all(body));
    auto r = s.read_response(10s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(json::parse(r->body)["tokens"].get<std::vector<int32_t>>(), hello);
  }
  {  // too large: 413 instead of 100, the body never sent
    const RawResponse r =
        exchange("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Length: " +
                 std::to_string(kMaxBody + 1) + "\r\n\r\n");
    EXPECT_EQ(r.status, 413);
  }
  {  // no such route: 404 instead of 100
    const RawResponse r = exchange(
        "POST /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n");
    EXPECT_EQ(r.status, 404);
  }
}

// One body limit whatever the Content-Type, checked from Content-Length before the body is read,
// and while a chunked body grows; answered in OpenAI's shape.
TEST_F(HttpProtocolTest, OneBodyLimitCheckedBeforeReading) {
  {  // a form-encoded body under the limit is read: it is not JSON (400), not 413
    const std::string form(20'000, 'a');
    const RawResponse r = exchange(
        "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
        "application/x-www-form-urlencoded\r\nContent-Length: " +
        std::to_string(form.size()) + "\r\n\r\n" + form);
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(error_message(r).find("JSON"), std::string::npos);
  }
  {  // over the limit: answered from the head alone, at once
    const auto t0 = Clock::now();
    const RawResponse r = exchange(
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
        "application/json\r\nContent-Length: " +
        std::to_string(40 << 20) + "\r\n\r\n{\"prompt\": \"");
    EXPECT_EQ(r.status, 413);
    EXPECT_NE(error_message(r).find(std::to_string(kMaxBody)), std::string::npos) << r.body;
    EXPECT_LT(seconds_since(t0), 2.0);
  }
  {  // chunked, growing past the limit
    RawSocket s(port_);
    ASSERT_TRUE(s.connected());
    ASSERT_TRUE(
        s.send_all("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
    const std::string piece = "10000\r\n" + std::string(0x10000, 'x') + "\r\n";
    for (size_t sent = 0; sent <= kMaxBody; sent += 0x10000) s.send_all(piece);
    auto r = s.read_response(5s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
  }
  expect_serves("large bodies");
}

// Integers beyond int64, or beyond the field's own range, are refused with a 400 naming the
// field (max_tokens 2^64-1 used to wrap to -1: unlimited). So are probabilities outside [0, 1].
TEST_F(HttpProtocolTest, OutOfRangeNumbersNameTheirField) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 18446744073709551615})", "'max_tokens'"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 9223372036854775808})", "'max_tokens'"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 3000000000})", "'max_tokens'"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 1e30})",
       "'max_completion_tokens'"},
      {"/completion", R"({"prompt": "x", "n_predict": 18446744073709551615})", "'n_predict'"},
      {"/v1/completions", R"({"prompt": "x", "seed": 18446744073709551615})", "'seed'"},
      {"/v1/completions", R"({"prompt": "x", "top_k": 4294967296})", "'top_k'"},
      {"/v1/completions", R"({"prompt": "x", "n": 9223372036854775807})", "'n'"},
      {"/v1/completions", R"({"prompt": "x", "temperature": 1e300})", "'temperature'"},
      {"/v1/completions", R"({"prompt": "x", "top_p": 2})", "'top_p'"},
      {"/v1/completions", R"({"prompt": "x", "min_p": -0.5})", "'min_p'"},
      {"/v1/completions", R"({"prompt": [18446744073709551615]})", "'prompt'"},
      {"/v1/completions", R"({"prompt": "x", "logit_bias": {"5": 1e300}})", "'logit_bias'"},
      {"/completion", R"({"prompt": "x", "logit_bias": [[18446744073709551615, 1]]})", "'logit_bias'"},
  };
  for (const auto& [path, body, field] : cases) {
    const RawResponse r = exchange(post(path, body));
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_NE(error_message(r).find(field), std::string::npos) << body << " -> " << r.body;
  }
}

// What the layer answers itself carries OpenAI's error shape too; 405 names the allowed methods;
// HEAD is GET without the body.
TEST_F(HttpProtocolTest, LayerAnswersUseOpenAiShape) {
  const RawResponse missing = exchange(get("/no/such/route"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(error_message(missing).find("/no/such/route"), std::string::npos);
  EXPECT_EQ(json::parse(missing.body)["error"]["type"], "not_found_error");
  const RawResponse method = exchange(post("/health", "{}"));
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.header("Allow"), "GET, HEAD, OPTIONS");
  EXPECT_FALSE(error_message(method).empty());
  RawSocket s(port_);
  ASSERT_TRUE(s.send_all("HEAD /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + get("/health")));
  auto head = s.read_response(5s, /*to_head=*/true);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_GT(std::stoi(head->header("Content-Length")), 0);
  // No body followed: the next bytes are the next answer.
  auto next = s.read_response(5s);
  ASSERT_TRUE(next);
  EXPECT_EQ(json::parse(next->body)["status"], "ok");
}

// Browsers' preflight is answered without credentials; answers name the allowed origin.
TEST_F(HttpProtocolTest, CorsPreflightAndOrigin) {
  const RawResponse pre = exchange(
      "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://app.example\r\n"
      "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization, "
      "content-type\r\n\r\n");
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.header("Access-Control-Allow-Origin"), "*");
  EXPECT_NE(pre.header("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(pre.header("Access-Control-Allow-Headers"), "authorization, content-type");
  const RawResponse models = exchange(get("/v1/models", "Origin: http://app.example\r\n"));
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(models.header("Access-Control-Allow-Origin"), "*");
}

// A client that trickles its head gets 408 at the head deadline; one that says nothing is closed
// silently; a body that does not arrive in time gets 408. Concurrently: the whole takes about
// the longest deadline.
TEST_F(HttpProtocolTest, HeadAndBodyDeadlines) {
  RawSocket trickle(port_), silent(port_), slow_body(port_);
  ASSERT_TRUE(trickle.connected() && silent.connected() && slow_body.connected());
  ASSERT_TRUE(
      slow_body.send_all("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"con"));
  const auto t0 = Clock::now();
  for (char ch : get("/health", "X-Slow: " + std::string(40, 'a') + "\r\n")) {  // 1 byte / 100 ms
    if (trickle.has_input() || !trickle.send_all(std::string(1, ch))) break;
    std::this_thread::sleep_for(100ms);
  }
  auto head_late = trickle.read_response(5s);
  const double head_s = seconds_since(t0);
  ASSERT_TRUE(head_late);
  EXPECT_EQ(head_late->status, 408);
  EXPECT_FALSE(error_message(*head_late).empty());
  EXPECT_LT(head_s, kHeadTimeoutMs / 1000.0 + 1.5);
  EXPECT_TRUE(silent.closed_by_peer(3s)) << "an idle connection outlived the head deadline";
  auto body_late = slow_body.read_response(5s);
  ASSERT_TRUE(body_late);
  EXPECT_EQ(body_late->status, 408);
  EXPECT_LT(seconds_since(t0), kIoTimeoutS + 2.0);
  expect_serves("deadlines");
}

// Keep-alive: several requests on one HTTP/1.1 connection; HTTP/1.0 closes after its answer.
TEST_F(HttpProtocolTest, KeepAliveAndHttp10) {
  RawSocket s(port_);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.send_all(post("/tokenize", R"({"content": "a"})")));
    auto r = s.read_response(5s);
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, 200);
  }
  RawSocket old(port_);
  ASSERT_TRUE(old.send_all("GET /health HTTP/1.0\r\n\r\n"));
  auto r = old.read_response(5s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->header("Connection"), "close");
  EXPECT_TRUE(old.closed_by_peer(3s));
}

}  // namespace
}  // namespace kiln::serve
