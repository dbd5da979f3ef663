// Test helpers for `bertfit serve`: the server as a child process (its port read from the
// `serve: listening on HOST:PORT` line on stderr) and a small HTTP/1.1 client over a plain
// socket, keep-alive, that can also send raw bytes (malformed or partial requests).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace bertfit::testing {

// How the server process is started beyond its arguments.
struct ServeSetup {
  int max_files = 0;  // `ulimit -n` of the server (soft and hard); 0: inherited
  std::vector<std::pair<std::string, std::string>> env;  // variables set for the server only
};

class ServeProcess {
 public:
  // Starts `bertfit serve --port 0 <args>` (args are whitespace-separated words) and waits for
  // its listening line (up to 60 s; fails the test otherwise).
  explicit ServeProcess(const std::string& args, const ServeSetup& setup = {});
  // Sends SIGKILL if still running.
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  bool started() const { return port_ > 0; }
  // Sends sig and waits for the exit; the exit code (128 + signal if killed).
  int stop(int sig);
  std::string err() const;  // stderr so far

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string err_path_;
};

struct HttpReply {
  int status = 0;                              // 0: no answer (the connection closed)
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

class HttpClient {
 public:
  explicit HttpClient(int port);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // One request on the kept-alive connection (reconnecting if the server closed it).
  HttpReply request(const std::string& method, const std::string& path,
                    const std::string& body = "",
                    const std::vector<std::string>& extra_headers = {});
  HttpReply post(const std::string& path, const std::string& body,
                 const std::vector<std::string>& extra_headers = {}) {
    return request("POST", path, body, extra_headers);
  }
  HttpReply get(const std::string& path, const std::vector<std::string>& extra_headers = {}) {
    return request("GET", path, "", extra_headers);
  }

  // Raw access: send bytes as they are; read one reply (status 0 if the server closes first);
  // whether the server has closed the connection (waits up to timeout_ms).
  bool send_raw(const std::string& bytes);
  HttpReply read_reply();
  bool closed_by_server(int timeout_ms);
  // Whether any byte of an answer (or the close) has arrived, without waiting.
  bool has_reply_bytes();
  void close();

 private:
  void connect_if_needed();
  int port_;
  int fd_ = -1;
  std::string pending_;  // bytes read past the last reply
};

// User + system CPU time of a process so far, in clock ticks (1/100 s here).
long cpu_ticks(pid_t pid);

// The value of one /metrics line (`name{labels} value`, not a # HELP line); -1 when absent.
long metric_value(const std::string& metrics, const std::string& line_start);

long count_lines(const std::string& text);

// A connection to 127.0.0.1:port that sends nothing (-1 if connect failed); the caller closes it.
int open_idle_connection(int port);

}  // namespace bertfit::testing
