#include "serve/http/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>
#include <unordered_map>

#include "serve/http/exchange_state.h"
#include "serve/http/wire.h"
#include "serve/http/worker_pool.h"

namespace kiln::serve::http {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

// Input read ahead while a request is being answered (pipelined requests, and noticing a close).
constexpr size_t kReadAhead = 64 << 10;
// Body-phase input the parser may leave unconsumed (a chunk-size line, trailers) before 400.
constexpr size_t kMaxUnparsed = 64 << 10;
// After an answer that ends the connection, input is read and dropped this long so that the
// client receives the answer instead of a reset (lingering close).
constexpr auto kLinger = std::chrono::seconds(2);
// Pause of the accept loop when the process is out of descriptors (or memory).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

bool origin_allowed(std::string_view list, std::string_view origin) {
  size_t at = 0;
  while (at <= list.size()) {
    size_t end = list.find(',', at);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(at, end - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item == origin) return true;
    at = end + 1;
  }
  return false;
}

class Connection;

}  // namespace

struct HttpServer::Impl {
  Impl(Router r, HttpOptions o)
      : router(std::move(r)), opt(std::move(o)), workers(std::max<size_t>(1, opt.max_workers)) {
    if (!opt.error_response) {
      opt.error_response = [](int status, std::string_view message) {
        return Response{.status = status,
                        .content_type = "text/plain; charset=utf-8",
                        .body = std::string(message) + "\n",
                        .headers = {}};
      };
    }
  }

  void accept();
  void begin_stop(std::chrono::milliseconds grace);
  void await_stop(std::chrono::steady_clock::time_point deadline);
  void close_all();
  void log(const std::string& message) const {
    if (opt.log) opt.log(message);
  }
  // CORS headers for an answer to `request` (none without an Origin, or for an origin not allowed).
  Headers cors_headers(const Request& request) const;

  const Router router;
  HttpOptions opt;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_pause{io};
  asio::steady_timer stop_timer{io};
  std::thread io_thread;
  WorkerPool workers;
  // I/O thread only.
  // Every open connection (owned here until it closes; pending operations hold it too).
  std::unordered_map<Connection*, std::shared_ptr<Connection>> connections;
  bool stopping = false;
  bool out_of_descriptors = false;  // logged once per episode
  std::array<char, 64 << 10> read_buffer;
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl& server, tcp::socket socket)
      : srv_(server), sock_(std::move(socket)), timer_(server.io), parser_(server.opt.limits) {}

  void start() {
    error_code ec;
    sock_.non_blocking(true, ec);
    sock_.set_option(tcp::no_delay(true), ec);
    // The kernel queues at most this much that it has not sent yet (TCP_NOTSENT_LOWAT), so that
    // a client that stops reading blocks the writes here, not megabytes later (the send buffer
    // grows to tcp_wmem's maximum otherwise). Bytes in flight are not limited.
    const int lowat = static_cast<int>(kStreamBufferBytes);
    ::setsockopt(sock_.native_handle(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
    await_request();
    read();
  }

  // The server stops: idle connections close now, requests still arriving get 503, answers under
  // way finish first (the server closes what is left after its grace period).
  void stop_gracefully() {
    close_after_ = true;
    if (phase_ == Phase::Head && !parser_.started()) return close();
    if (phase_ == Phase::Head || phase_ == Phase::Body) refuse({503, "the server is shutting down"});
    if (phase_ == Phase::Lingering) close();
  }

  void close() {
    if (phase_ == Phase::Closed) return;
    const auto keep = shared_from_this();  // the registry may hold the last reference
    phase_ = Phase::Closed;
    ++timer_generation_;
    error_code ec;
    timer_.cancel();
    sock_.close(ec);
    srv_.connections.erase(this);
    if (auto ex = std::move(exchange_)) ex->client_gone();
  }

 private:
  enum class Phase {
    Head,       // waiting for a request's head
    Body,       // reading its body
    Handling,   // its route answers; the answer is written as it comes
    Lingering,  // the last answer was sent; input is dropped until the peer closes or kLinger
    Closed,
  };
  enum class Deadline { None, Head, Body, Linger };

  // --- input ---

  void read() {
    if (reading_ || peer_eof_ || phase_ == Phase::Closed) return;
    if (phase_ == Phase::Handling && in_.size() >= kReadAhead) return;  // resumes at the next request
    reading_ = true;
    sock_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const error_code& ec) {
      self->reading_ = false;
      if (!ec) self->on_readable();
    });
  }

  void on_readable() {
    if (phase_ == Phase::Closed) return;
    error_code ec;
    const size_t n = sock_.read_some(asio::buffer(srv_.read_buffer), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return read();
    if (ec == asio::error::eof) return on_eof();
    if (ec) return close();
    if (phase_ != Phase::Lingering) {
      in_.append(srv_.read_buffer.data(), n);
      process();
    }
    read();
  }

  void on_eof() {
    peer_eof_ = true;
    switch (phase_) {
      case Phase::Head:
      case Phase::Body:
        parser_.end_of_input();
        if (parser_.state() == RequestParser::State::Failed) return refuse(parser_.error());
        return close();  // a clean end between requests
      case Phase::Handling:
        // Half-closed after its last request: the client is taken to have left (as a proxy
        // would take it). Requests it pipelined before closing are still answered.
        if (in_.empty() && exchange_) exchange_->client_gone();
        return;
      case Phase::Lingering:
      case Phase::Closed:
        return close();
    }
  }

  // Parses what arrived: the head, then the body, then hands the request to its route.
  void process() {
    while (phase_ == Phase::Head || phase_ == Phase::Body) {
      const size_t used = parser_.feed(in_);
      in_.erase(0, used);
      const auto state = parser_.state();
      if (state == RequestParser::State::Failed) return refuse(parser_.error());
      if (phase_ == Phase::Head) {
        if (state == RequestParser::State::Head) return;  // more of the head to come
        if (!on_head()) return;
        if (state == RequestParser::State::Done) return on_request();
        continue;  // to the body
      }
      if (state == RequestParser::State::Done) return on_request();
      if (used == 0) {  // more of the body to come
        if (in_.size() > kMaxUnparsed) refuse({400, "a chunk-size line or the trailers are too long"});
        return;
      }
    }
  }

  // The head is in: route lookup, CORS preflight, guard, 100-continue. False when answered here.
  bool on_head() {
    const Request& req = parser_.request();
    if (req.method == "OPTIONS") {
      Response r;
      r.status = 204;
      if (auto m = srv_.router.find("GET", req.path); m.path_known) r.headers.push_back({"Allow", m.allow});
      answer_now(std::move(r));
      return false;
    }
    match_ = srv_.router.find(req.method, req.path);
    if (!match_.route) {
      if (match_.path_known) {
        Response r = srv_.opt.error_response(405, "method " + req.method + " is not allowed on " + req.path);
        r.headers.push_back({"Allow", match_.allow});
        answer_now(std::move(r));
      } else {
        answer_now(srv_.opt.error_response(404, "no route for " + req.method + " " + req.path));
      }
      return false;
    }
    if (const Guard& guard = srv_.router.guard()) {
      if (auto refused = guard(req)) {
        answer_now(std::move(*refused));
        return false;
      }
    }
    if (parser_.state() == RequestParser::State::Body) {
      phase_ = Phase::Body;
      set_deadline(Deadline::Body, Clock::now() + srv_.opt.io_timeout);
      if (parser_.expects_continue()) send(std::string(kContinue));
    }
    return true;
  }

  void on_request() {
    const Router::Route* route = match_.route;
    start_exchange(parser_.take_request());
    if (route->options.dispatch == Dispatch::Inline) return run_handler(exchange_, route);
    srv_.workers.post([ex = exchange_, route] { run_handler(ex, route); });
  }

  static void run_handler(const std::shared_ptr<ExchangeState>& ex, const Router::Route* route) {
    {
      Exchange exchange(ex);
      try {
        route->handler(ex->request, exchange);
      } catch (const std::exception& e) {
        exchange.respond(Response{.status = 500,
                                  .content_type = "text/plain; charset=utf-8",
                                  .body = std::string("internal error: ") + e.what() + "\n",
                                  .headers = {}});
      }
    }
    ex->handler_returned();
  }

  // --- answers ---

  // The request moves to Handling with an exchange that wakes pump() on the I/O thread.
  void start_exchange(Request request) {
    phase_ = Phase::Handling;
    set_deadline(Deadline::None, {});
    head_only_ = request.method == "HEAD";
    version_ = request.version;
    std::weak_ptr<Connection> weak = weak_from_this();
    exchange_ = std::make_shared<ExchangeState>(std::move(request), [weak, &io = srv_.io] {
      asio::post(io, [weak] {
        if (auto self = weak.lock()) self->pump();
      });
    });
  }

  // Answers the request whose head is in without running a route. A body not read yet stays
  // unread, so the connection closes after the answer.
  void answer_now(Response r) {
    if (parser_.state() != RequestParser::State::Done) close_after_ = true;
    start_exchange(parser_.take_request());
    exchange_->respond(std::move(r));
    exchange_->handler_returned();
  }

  // A request that cannot be parsed or finished: the error, then the connection closes.
  void refuse(const RequestError& e) {
    close_after_ = true;
    if (phase_ == Phase::Handling || phase_ == Phase::Lingering || phase_ == Phase::Closed) return;
    answer_now(srv_.opt.error_response(e.status, e.message));
  }

  // Takes what the exchange has and writes it.
  void pump() {
    if (phase_ != Phase::Handling || !exchange_ || writing_) return;
    ExchangeState::Output o = exchange_->take();
    std::string bytes;
    if (o.head) {
      if (srv_.stopping || (peer_eof_ && in_.empty()) || !parser_.keep_alive()) close_after_ = true;
      HeadOptions h;
      h.version = version_;
      if (o.complete) {
        h.framing = Framing::Length;
        h.length = o.head->body.size();
      } else {
        streaming_ = true;
        h.framing = version_ == 11 ? Framing::Chunked : Framing::UntilClose;
        if (h.framing == Framing::UntilClose) close_after_ = true;
      }
      chunked_ = h.framing == Framing::Chunked;
      h.close = close_after_;
      h.keep_alive_10 = version_ == 10 && !close_after_;
      bytes = response_head(*o.head, h, srv_.cors_headers(exchange_->request));
      if (o.complete && !head_only_) bytes += o.head->body;
    }
    if (streaming_ && !head_only_ && !o.bytes.empty()) bytes += chunked_ ? chunk(o.bytes) : o.bytes;
    unreported_ += o.bytes.size();
    if (o.ended) {
      if (streaming_ && chunked_ && !head_only_) bytes += kLastChunk;
      answer_ended_ = true;
    }
    if (!bytes.empty()) return send(std::move(bytes));
    report_sent();
    if (answer_ended_) finish_exchange();
  }

  void send(std::string bytes) {
    out_ += bytes;
    if (!writing_) write_some();
  }

  // Writes out_; a client that takes nothing for io_timeout is dropped.
  void write_some() {
    writing_ = true;
    arm(Clock::now() + srv_.opt.io_timeout);
    sock_.async_write_some(
        asio::buffer(out_.data() + out_sent_, out_.size() - out_sent_),
        [self = shared_from_this()](const error_code& ec, size_t n) { self->on_written(ec, n); });
  }

  void on_written(const error_code& ec, size_t n) {
    if (phase_ == Phase::Closed) return;
    if (ec == asio::error::would_block || ec == asio::error::try_again) return write_some();
    if (ec) return close();
    out_sent_ += n;
    if (out_sent_ < out_.size()) return write_some();
    writing_ = false;
    out_.clear();
    out_sent_ = 0;
    set_deadline(deadline_, deadline_at_);  // back to the phase's deadline
    report_sent();
    if (answer_ended_) return finish_exchange();
    pump();
  }

  // Streamed bytes written: a handler blocked in write() may go on.
  void report_sent() {
    if (exchange_ && unreported_ > 0) exchange_->sent(unreported_);
    unreported_ = 0;
  }

  // The answer was written: the next request, or the end of the connection.
  void finish_exchange() {
    exchange_.reset();
    answer_ended_ = streaming_ = chunked_ = false;
    if (close_after_ || srv_.stopping) return end_connection();
    parser_.reset();
    await_request();
    process();
    if (peer_eof_ && (phase_ == Phase::Head || phase_ == Phase::Body))
      return on_eof();  // what is left is all
    read();
  }

  void await_request() {
    phase_ = Phase::Head;
    set_deadline(Deadline::Head, Clock::now() + srv_.opt.head_timeout);
  }

  // After the last answer: no more sending, and input is dropped for kLinger (so that the client
  // reads the answer rather than a reset caused by unread input), then the socket closes.
  void end_connection() {
    error_code ec;
    sock_.shutdown(tcp::socket::shutdown_send, ec);
    if (peer_eof_ || srv_.stopping) return close();
    phase_ = Phase::Lingering;
    set_deadline(Deadline::Linger, Clock::now() + kLinger);
    read();
  }

  // --- deadlines: one timer; a write in progress has its own (io_timeout without progress) ---

  void set_deadline(Deadline kind, Clock::time_point at) {
    deadline_ = kind;
    deadline_at_ = at;
    if (writing_) return;  // armed again when the write ends
    if (kind == Deadline::None) {
      ++timer_generation_;
      timer_.cancel();
      return;
    }
    arm(at);
  }

  void arm(Clock::time_point at) {
    const uint64_t generation = ++timer_generation_;
    timer_.expires_at(at);
    timer_.async_wait([self = shared_from_this(), generation](const error_code& ec) {
      if (!ec && generation == self->timer_generation_) self->on_deadline();
    });
  }

  void on_deadline() {
    if (writing_) return close();  // the client took nothing for io_timeout
    switch (deadline_) {
      case Deadline::Head:
        if (!parser_.started() && in_.empty()) return close();  // idle: nothing to answer
        return refuse({408, "the request head did not arrive within " + seconds(srv_.opt.head_timeout)});
      case Deadline::Body:
        return refuse({408, "the request body did not arrive within " + seconds(srv_.opt.io_timeout)});
      case Deadline::Linger:
        return close();
      case Deadline::None:
        return;
    }
  }

  static std::string seconds(std::chrono::milliseconds d) {
    const auto ms = d.count();
    return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
  }

  HttpServer::Impl& srv_;
  tcp::socket sock_;
  asio::steady_timer timer_;
  uint64_t timer_generation_ = 0;  // a wait whose generation is stale was superseded
  Deadline deadline_ = Deadline::None;
  Clock::time_point deadline_at_;
  RequestParser parser_;
  Router::Match match_;
  Phase phase_ = Phase::Head;
  std::string in_;  // received, not yet parsed
  bool reading_ = false;
  bool peer_eof_ = false;
  bool close_after_ = false;  // the connection ends after the current answer
  // The answer being written.
  std::shared_ptr<ExchangeState> exchange_;
  int version_ = 11;
  bool head_only_ = false;
  bool streaming_ = false, chunked_ = false;
  bool answer_ended_ = false;
  size_t unreported_ = 0;  // streamed body bytes taken, not yet reported as sent
  std::string out_;        // bytes being written, from out_sent_
  size_t out_sent_ = 0;
  bool writing_ = false;
};

}  // namespace

Headers HttpServer::Impl::cors_headers(const Request& request) const {
  Headers h;
  const auto origin = find_header(request.headers, "Origin");
  if (opt.cors_origins.empty() || !origin) return h;
  if (opt.cors_origins == "*") {
    h.push_back({"Access-Control-Allow-Origin", "*"});
  } else if (origin_allowed(opt.cors_origins, *origin)) {
    h.push_back({"Access-Control-Allow-Origin", std::string(*origin)});
    h.push_back({"Vary", "Origin"});
  } else {
    return h;
  }
  if (request.method == "OPTIONS") {
    h.push_back({"Access-Control-Allow-Methods", "GET, POST, OPTIONS"});
    const std::string_view asked = request.header("Access-Control-Request-Headers");
    h.push_back(
        {"Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : std::string(asked)});
    h.push_back({"Access-Control-Max-Age", "86400"});
  }
  return h;
}

void HttpServer::Impl::accept() {
  acceptor.async_accept([this](const error_code& ec, tcp::socket socket) {
    if (stopping || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors or memory: the pending connection stays in the backlog; accepting
      // again at once would fail again at once. Wait, then try again.
      if (ec == asio::error::no_descriptors || ec.value() == ENFILE || ec == asio::error::no_buffer_space ||
          ec == asio::error::no_memory) {
        if (!out_of_descriptors)
          log("accept: " + ec.message() + ": new connections wait until descriptors free up");
        out_of_descriptors = true;
        accept_pause.expires_after(kAcceptPause);
        accept_pause.async_wait([this](const error_code& e) {
          if (!e && !stopping) accept();
        });
        return;
      }
      return accept();  // the client gave up before it was accepted, ...
    }
    out_of_descriptors = false;
    auto c = std::make_shared<Connection>(*this, std::move(socket));
    connections.emplace(c.get(), c);
    c->start();
    accept();
  });
}

void HttpServer::Impl::close_all() {
  std::vector<std::shared_ptr<Connection>> open;
  for (auto& [raw, c] : connections) open.push_back(c);
  for (auto& c : open) c->close();
  connections.clear();
}

void HttpServer::Impl::begin_stop(std::chrono::milliseconds grace) {
  stopping = true;
  error_code ec;
  acceptor.close(ec);
  accept_pause.cancel();
  std::vector<std::shared_ptr<Connection>> open;
  for (auto& [raw, c] : connections) open.push_back(c);
  for (auto& c : open) c->stop_gracefully();
  await_stop(Clock::now() + grace);
}

void HttpServer::Impl::await_stop(Clock::time_point deadline) {
  if (connections.empty() || Clock::now() >= deadline) {
    close_all();  // what is still open after the grace period
    io.stop();
    return;
  }
  stop_timer.expires_after(std::chrono::milliseconds(10));
  stop_timer.async_wait([this, deadline](const error_code&) { await_stop(deadline); });
}

HttpServer::HttpServer(Router router, HttpOptions options)
    : impl_(std::make_unique<Impl>(std::move(router), std::move(options))) {}

HttpServer::~HttpServer() { stop(std::chrono::milliseconds(0)); }

Result<int> HttpServer::listen(const std::string& host, int port) {
  Impl& s = *impl_;
  const std::string where = host + ":" + std::to_string(port);
  error_code ec;
  tcp::resolver resolver(s.io);
  const auto endpoints = resolver.resolve(host, std::to_string(port),
                                          tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty())
    return make_error("cannot listen on ", where, ": ", ec ? ec.message() : "no address");
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  if (s.acceptor.open(endpoint.protocol(), ec); ec)
    return make_error("cannot listen on ", where, ": ", ec.message());
  // SO_REUSEADDR lets a restarted server bind while old connections linger in TIME_WAIT; it does
  // not let two servers listen on one port. SO_REUSEPORT would, and only --reuse-port asks it.
  s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (s.opt.reuse_port) {
    const int one = 1;
    if (::setsockopt(s.acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
      return make_error("cannot listen on ", where, ": SO_REUSEPORT: ", std::strerror(errno));
  }
  if (s.acceptor.bind(endpoint, ec); ec) {
    s.acceptor.close();
    return make_error("cannot listen on ", where, ": ", ec.message());
  }
  if (s.acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) {
    s.acceptor.close();
    return make_error("cannot listen on ", where, ": ", ec.message());
  }
  const int bound = s.acceptor.local_endpoint(ec).port();
  s.accept();
  s.io_thread = std::thread([&s] { s.io.run(); });
  return bound;
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (s.io_thread.joinable()) {
    asio::post(s.io, [&s, grace] { s.begin_stop(grace); });
    s.io_thread.join();
  }
  // Handlers blocked on their clients were released by close_all(); the others return on their own.
  s.workers.stop();
}

}  // namespace kiln::serve::http
