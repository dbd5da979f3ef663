// The serve test helpers (see serve_client.h).
#include "serve_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "cli_util.h"

namespace bertfit::testing {

ServeProcess::ServeProcess(const std::string& args, const ServeSetup& setup) {
  char tmpl[] = "/tmp/bertfit-serve-err-XXXXXX";
  const int err_fd = ::mkstemp(tmpl);
  if (err_fd < 0) std::abort();
  err_path_ = tmpl;
  std::vector<std::string> words = {bertfit_binary(), "serve", "--port", "0"};
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  pid_ = ::fork();
  if (pid_ == 0) {
    const int null_fd = ::open("/dev/null", O_RDWR);
    ::dup2(null_fd, 0);
    ::dup2(null_fd, 1);
    ::dup2(err_fd, 2);
    if (setup.max_files > 0) {
      const rlimit limit{static_cast<rlim_t>(setup.max_files),
                         static_cast<rlim_t>(setup.max_files)};
      if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) std::_Exit(126);
    }
    for (const auto& [name, value] : setup.env) ::setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::_Exit(127);
  }
  ::close(err_fd);
  const std::string marker = "serve: listening on ";
  for (int i = 0; i < 600; ++i) {
    const std::string e = err();
    const auto at = e.find(marker);
    if (at != std::string::npos && e.find('\n', at) != std::string::npos) {
      const auto colon = e.rfind(':', e.find('\n', at));
      port_ = std::atoi(e.c_str() + colon + 1);
      return;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      ADD_FAILURE() << "bertfit serve exited before listening:\n" << e;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "bertfit serve did not listen within 60 s:\n" << err();
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  ::unlink(err_path_.c_str());
}

int ServeProcess::stop(int sig) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, sig);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string ServeProcess::err() const { return read_text(err_path_); }

HttpClient::HttpClient(int port) : port_(port) {}
HttpClient::~HttpClient() { close(); }

void HttpClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  pending_.clear();
}

void HttpClient::connect_if_needed() {
  if (fd_ >= 0) return;
  fd_ = open_idle_connection(port_);
  if (fd_ < 0) return;
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool HttpClient::send_raw(const std::string& bytes) {
  connect_if_needed();
  if (fd_ < 0) return false;
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

HttpReply HttpClient::read_reply() {
  HttpReply reply;
  if (fd_ < 0) return reply;
  auto fill = [&]() {
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    pending_.append(buf, static_cast<std::size_t>(n));
    return true;
  };
  std::size_t end;
  while ((end = pending_.find("\r\n\r\n")) == std::string::npos) {
    if (!fill()) {
      close();
      return reply;
    }
  }
  std::istringstream head(pending_.substr(0, end));
  std::string line;
  std::getline(head, line);
  if (line.size() > 12) reply.status = std::atoi(line.c_str() + 9);
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    reply.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
  }
  pending_.erase(0, end + 4);
  const std::size_t length =
      std::stoul(reply.headers.count("content-length") > 0 ? reply.headers["content-length"]
                                                           : std::string("0"));
  while (pending_.size() < length) {
    if (!fill()) {
      reply.status = 0;
      close();
      return reply;
    }
  }
  reply.body = pending_.substr(0, length);
  pending_.erase(0, length);
  if (reply.headers["connection"] == "close") close();
  return reply;
}

HttpReply HttpClient::request(const std::string& method, const std::string& path,
                              const std::string& body,
                              const std::vector<std::string>& extra_headers) {
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (method == "POST") {
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  for (const std::string& h : extra_headers) req += h + "\r\n";
  req += "\r\n" + body;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!send_raw(req)) {
      close();
      continue;
    }
    HttpReply r = read_reply();
    if (r.status != 0) return r;
    close();  // the server closed a kept-alive connection: try once more on a new one
  }
  return {};
}

bool HttpClient::closed_by_server(int timeout_ms) {
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return false;
  char c;
  const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK);
  return n <= 0;
}

bool HttpClient::has_reply_bytes() {
  if (!pending_.empty()) return true;
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

long cpu_ticks(pid_t pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream in(stat.substr(stat.rfind(')') + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

long metric_value(const std::string& metrics, const std::string& line_start) {
  const auto at = metrics.find("\n" + line_start + " ");
  return at == std::string::npos ? -1L : std::atol(metrics.c_str() + at + line_start.size() + 2);
}

long count_lines(const std::string& text) {
  return static_cast<long>(std::count(text.begin(), text.end(), '\n'));
}

int open_idle_connection(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace bertfit::testing
