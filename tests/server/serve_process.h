// Test support for the server tests that run `kiln serve` as a child process (load_test.cpp,
// fault_test.cpp): start it on a free loopback port, watch it (alive, RSS, /slots), talk to it
// over raw sockets where httplib cannot make the fault, and kill it at the end.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kiln::test {

// One `KILN_BINARY_DIR/kiln serve ARGS --port 0` child (ARGS may name a --port instead; the
// environment variable KILN_TEST_SERVE_BINARY names another `kiln` to test, e.g. main's). Its
// stderr is drained on a thread into log(). The destructor SIGKILLs it if it still runs. Not
// thread-safe except alive(), rss_kib(), cpu_seconds(), port() and log().
class ServeProcess {
 public:
  // Starts the server and waits until it prints "ready:" and GET /health answers 200. On failure
  // returns null and sets *error (with the server's log). Sets SIGPIPE to ignored in this process.
  // `env`: extra NAME=VALUE entries for the server's environment.
  static std::unique_ptr<ServeProcess> start(const std::vector<std::string>& args, std::string* error,
                                             const std::vector<std::string>& env = {});
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // True while the process has not exited (it is reaped here when it has).
  bool alive();
  // VmRSS of the process in KiB (/proc/PID/status); -1 when unreadable.
  int64_t rss_kib() const;
  // CPU time the process used so far (user + system, /proc/PID/stat); -1 when unreadable.
  double cpu_seconds() const;
  // SIGTERM, then waits up to `timeout` for the exit; the wait status, or -1 on timeout.
  int terminate(std::chrono::milliseconds timeout);
  // Sends `sig`; then wait_exit() for the wait status (-1 when it still runs after `timeout`).
  void signal(int sig);
  int wait_exit(std::chrono::milliseconds timeout);
  std::string log() const;

 private:
  ServeProcess() = default;
  void drain(int fd);

  pid_t pid_ = -1;
  bool reaped_ = false;
  int port_ = 0;
  std::thread drain_thread_;
  mutable std::mutex log_mutex_;
  std::string log_;
};

// GET /slots; an empty array when the request fails.
nlohmann::json get_slots(int port);
// Polls /slots every 20 ms until no slot is processing or `timeout` passes. True when idle;
// *last (if non-null) gets the last /slots answer.
bool wait_slots_idle(int port, std::chrono::milliseconds timeout, nlohmann::json* last = nullptr);

// One HTTP response read off a raw connection.
struct RawResponse {
  int status = 0;
  std::string head;  // status line and headers, up to the blank line
  std::string body;  // chunked bodies decoded
  // The value of a header in `head` (case-insensitive name); empty when absent.
  std::string header(const std::string& name) const;
};

// A blocking TCP connection to 127.0.0.1:port (closed by the destructor), for requests httplib
// cannot make: partial bodies, byte-by-byte headers, silence, abrupt closes, pipelining.
class RawSocket {
 public:
  // connected() tells whether it worked. receive_buffer > 0: SO_RCVBUF before connecting (a
  // client that reads nothing then holds little of what the server sends).
  explicit RawSocket(int port, int receive_buffer = 0);
  ~RawSocket();
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Sends all bytes; false when the peer is gone.
  bool send_all(const std::string& bytes);
  // Sends one byte at a time with `gap` between bytes.
  bool send_slowly(const std::string& bytes, std::chrono::milliseconds gap);
  void shutdown_write();
  // Reads until the peer closes or `timeout` passes; what it read (after what read_response left).
  std::string read_all(std::chrono::milliseconds timeout);
  // Reads one response: its head, then a Content-Length or chunked body (or, without either,
  // until the peer closes; none for 1xx, 204, 304 and, with `to_head`, answers to HEAD). Bytes
  // after it stay for the next call. nullopt when the peer closed or `timeout` passed first.
  std::optional<RawResponse> read_response(std::chrono::milliseconds timeout, bool to_head = false);
  // True when the peer closed the connection (EOF or reset) within `timeout`, with nothing more
  // to read.
  bool closed_by_peer(std::chrono::milliseconds timeout);
  // True when the peer has sent something or closed the connection (checked without waiting).
  bool has_input();
  void close();
  int fd() const { return fd_; }

 private:
  bool fill(std::chrono::steady_clock::time_point deadline);  // false: closed or timed out
  int fd_ = -1;
  std::string buffered_;  // received, not returned yet
};

// "POST PATH HTTP/1.1" with Host, Content-Type: application/json, Connection: close and a
// Content-Length of `content_length` (< 0: body.size()), followed by `body`.
std::string http_post(const std::string& path, const std::string& body, int64_t content_length = -1);
// The status code of a raw HTTP response ("HTTP/1.1 400 ..."), or 0.
int http_status(const std::string& response);
// The body of a raw HTTP response: what follows the headers, with chunked encoding decoded.
std::string http_body(const std::string& response);

// True when `body` is OpenAI's error shape {"error": {"message": string, "type": string, "code"}}.
bool is_openai_error(const std::string& body, std::string* message = nullptr);

}  // namespace kiln::test
