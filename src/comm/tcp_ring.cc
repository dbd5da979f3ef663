// TcpRing: set-up (listen, exchange, connect with a checked handshake) and the streamed ring
// all-reduce. See tcp_ring.h for the why and the algorithm.
#include "comm/tcp_ring.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/check.h"
#include "base/dtype.h"
#include "base/timer.h"

namespace bertfit {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kAddressMagic = 0x41524642;  // "BFRA"
constexpr std::size_t kMaxAddresses = 20;
constexpr std::uint64_t kHelloMagic = 0x31304e4952464200;  // "\0BFRING01"
constexpr std::size_t kHelloBytes = 24;
// Received partial sums are added in pieces of this size; a piece is forwarded once added.
constexpr std::size_t kPieceBytes = 256 * 1024;

// The ring cuts a buffer of n elements into `world` chunks; chunk c is [begin(c), begin(c + 1)).
std::int64_t chunk_begin(std::int64_t n, int world, int c) { return n * c / world; }

void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{p[i]} << (8 * i);
  return v;
}
void put64(std::uint8_t* p, std::uint64_t v) {
  put32(p, static_cast<std::uint32_t>(v));
  put32(p + 4, static_cast<std::uint32_t>(v >> 32));
}
std::uint64_t get64(const std::uint8_t* p) { return get32(p) | std::uint64_t{get32(p + 4)} << 32; }

std::string errno_text(int err) { return std::strerror(err); }

std::string ip_text(std::uint32_t address_be, int port) {
  char text[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = address_be;
  inet_ntop(AF_INET, &a, text, sizeof text);
  return cat(text, ":", port);
}

int milliseconds_until(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms, 0, 1000000));
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Moves exactly len bytes through a non-blocking socket before the deadline; "" or why not.
std::string transfer_all(int fd, bool sending, void* buffer, std::size_t len,
                         Clock::time_point deadline) {
  auto* p = static_cast<char*>(buffer);
  std::size_t done = 0;
  while (done < len) {
    ssize_t k =
        sending ? send(fd, p + done, len - done, MSG_NOSIGNAL) : recv(fd, p + done, len - done, 0);
    if (k > 0) {
      done += static_cast<std::size_t>(k);
      continue;
    }
    if (k == 0) return "connection closed";
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return errno_text(errno);
    pollfd pfd{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
    if (poll(&pfd, 1, milliseconds_until(deadline)) == 0) return "timed out";
  }
  return "";
}

struct Hello {
  std::uint64_t token = 0;
  int rank = -1, world = 0;
};

std::string exchange_hello(int fd, bool send_first, const Hello& mine, Hello* theirs,
                           Clock::time_point deadline) {
  std::uint8_t out[kHelloBytes] = {}, in[kHelloBytes] = {};
  put64(out, kHelloMagic);
  put64(out + 8, mine.token);
  put32(out + 16, static_cast<std::uint32_t>(mine.rank));
  put32(out + 20, static_cast<std::uint32_t>(mine.world));
  std::string error;
  if (send_first) error = transfer_all(fd, true, out, sizeof out, deadline);
  if (error.empty()) error = transfer_all(fd, false, in, sizeof in, deadline);
  if (error.empty() && get64(in) != kHelloMagic) error = "not a bertfit ring endpoint";
  if (error.empty()) {
    theirs->token = get64(in + 8);
    theirs->rank = static_cast<int>(get32(in + 16));
    theirs->world = static_cast<int>(get32(in + 20));
    if (theirs->token != mine.token || theirs->world != mine.world)
      error = "an endpoint of another job";
  }
  if (error.empty() && !send_first) error = transfer_all(fd, true, out, sizeof out, deadline);
  return error;
}

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_nonblocking(fd);
}

}  // namespace

TcpRing::TcpRing(int rank, int world) : rank_(rank), world_(world) {
  CHECK(world >= 2 && rank >= 0 && rank < world, "TcpRing: rank ", rank, " of ", world);
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw_error("rank ", rank_, ": gradient ring: socket(): ", errno_text(errno));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = 0;
  socklen_t size = sizeof any;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
      listen(listen_fd_, 16) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&any), &size) != 0) {
    int err = errno;
    close(listen_fd_);
    listen_fd_ = -1;
    throw_error("rank ", rank_, ": gradient ring: cannot listen on a TCP port: ", errno_text(err));
  }
  set_nonblocking(listen_fd_);
  port_ = ntohs(any.sin_port);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    std::vector<std::uint32_t> loopback;
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if ((i->ifa_flags & IFF_UP) == 0) continue;
      std::uint32_t a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
      ((i->ifa_flags & IFF_LOOPBACK) != 0 ? loopback : addresses_).push_back(a);
    }
    freeifaddrs(list);
    addresses_.insert(addresses_.end(), loopback.begin(), loopback.end());
  }
  if (addresses_.size() > kMaxAddresses) addresses_.resize(kMaxAddresses);
  staging_.resize(kPieceBytes);
}

TcpRing::~TcpRing() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stop_ = true;
  }
  stopping_.store(true);
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (int fd : {listen_fd_, left_fd_, right_fd_}) {
    if (fd >= 0) close(fd);
  }
}

std::vector<std::uint8_t> TcpRing::address() const {
  std::vector<std::uint8_t> record(kAddressBytes, 0);
  put32(record.data(), kAddressMagic);
  put32(record.data() + 4, static_cast<std::uint32_t>(port_));
  put32(record.data() + 8, static_cast<std::uint32_t>(addresses_.size()));
  for (std::size_t i = 0; i < addresses_.size(); ++i) {
    // Stored as the network-order bytes themselves.
    std::memcpy(record.data() + 12 + 4 * i, &addresses_[i], 4);
  }
  return record;
}

void TcpRing::connect(const std::vector<std::uint8_t>& all_addresses, std::uint64_t token,
                      double timeout_seconds) {
  CHECK(all_addresses.size() == kAddressBytes * static_cast<std::size_t>(world_),
        "TcpRing::connect: ", all_addresses.size(), " bytes of addresses");
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds));
  const Hello mine{token, rank_, world_};

  // Accept the left neighbour on a helper thread while this one connects to the right one
  // (every rank does both, so doing them in turn could wait in a circle).
  std::string accept_error;
  std::thread acceptor([&] {
    while (left_fd_ < 0) {
      pollfd pfd{listen_fd_, POLLIN, 0};
      if (poll(&pfd, 1, milliseconds_until(deadline)) <= 0) {
        accept_error = cat("rank ", left(), " (left neighbour) did not connect within ",
                           timeout_seconds, " s");
        return;
      }
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      tune(fd);
      // A silent stray connection must not hold up the neighbour queued behind it.
      Hello theirs;
      std::string error = exchange_hello(
          fd, false, mine, &theirs, std::min(deadline, Clock::now() + std::chrono::seconds(3)));
      if (error.empty() && theirs.rank == left()) {
        left_fd_ = fd;
      } else {
        close(fd);  // a stray connection: keep waiting for the neighbour
      }
    }
  });

  const std::uint8_t* record =
      all_addresses.data() + kAddressBytes * static_cast<std::size_t>(right());
  std::string tried;
  if (get32(record) != kAddressMagic) {
    tried = "no address record";
  } else {
    const int port = static_cast<int>(get32(record + 4));
    const std::size_t count = std::min<std::size_t>(get32(record + 8), kMaxAddresses);
    for (std::size_t i = 0; i < count && right_fd_ < 0; ++i) {
      std::uint32_t a = 0;
      std::memcpy(&a, record + 12 + 4 * i, 4);
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) break;
      tune(fd);
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_addr.s_addr = a;
      to.sin_port = htons(static_cast<std::uint16_t>(port));
      // A wrong address may swallow packets: give each at most 3 s.
      auto attempt = std::min(deadline, Clock::now() + std::chrono::seconds(3));
      std::string error;
      if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS) {
        error = errno_text(errno);
      } else {
        pollfd pfd{fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof err;
        if (poll(&pfd, 1, milliseconds_until(attempt)) == 0) {
          error = "timed out";
        } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
          error = errno_text(err);
        }
      }
      Hello theirs;
      if (error.empty()) error = exchange_hello(fd, true, mine, &theirs, attempt);
      if (error.empty() && theirs.rank != right()) error = cat("answered as rank ", theirs.rank);
      if (error.empty()) {
        right_fd_ = fd;
      } else {
        close(fd);
        tried += cat(tried.empty() ? "" : ", ", ip_text(a, port), " (", error, ")");
      }
    }
  }
  acceptor.join();
  if (right_fd_ < 0) {
    throw_error("rank ", rank_, ": gradient ring: cannot reach rank ", right(),
                " (right neighbour): ", tried.empty() ? "it has no IPv4 address" : tried);
  }
  if (left_fd_ < 0) throw_error("rank ", rank_, ": gradient ring: ", accept_error);
  close(listen_fd_);  // both neighbours are connected: later connections would only queue
  listen_fd_ = -1;
  thread_ = std::thread([this] { thread_main(); });
}

void TcpRing::start(float* data, std::int64_t n, WireDType wire,
                    std::function<void(const std::string&)> done) {
  std::string error;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!thread_.joinable()) error = cat("rank ", rank_, ": gradient ring is not connected");
    if (!broken_.empty()) error = broken_;
    if (error.empty()) jobs_.push_back(Job{data, n, wire, std::move(done)});
  }
  if (!error.empty()) {
    done(error);
    return;
  }
  cv_.notify_one();
}

double TcpRing::thread_cpu_seconds() const {
  // thread_ is only started in connect() and joined in the destructor.
  return thread_.joinable()
             ? bertfit::thread_cpu_seconds(const_cast<std::thread&>(thread_).native_handle())
             : 0;
}

void TcpRing::thread_main() {
  pthread_setname_np(pthread_self(), "bertfit-ring");  // for top -H and /proc/PID/task
  while (true) {
    Job job;
    std::string error;
    {
      std::unique_lock<std::mutex> guard(mutex_);
      cv_.wait(guard, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
      if (stop_ && broken_.empty()) broken_ = cat("rank ", rank_, ": gradient ring shut down");
      error = broken_;
    }
    if (error.empty()) {
      try {
        run(job);
      } catch (const Error& e) {
        error = e.what();
        std::lock_guard<std::mutex> guard(mutex_);
        broken_ = error;
      }
    }
    job.done(error);
  }
}

void TcpRing::run(const Job& job) {
  if (job.n == 0) return;
  if (job.wire == WireDType::kF32) {
    stream(
        job.data, job.n,
        [](float* dst, const float* src, std::size_t count) {
          for (std::size_t i = 0; i < count; ++i) dst[i] += src[i];
        },
        [](float*, std::size_t) {});  // the sums are already in place
    return;
  }
  // bf16 wire: a rank rounds only the chunk it sends first (its own); every later partial sum
  // is bf16(received partial + this rank's fp32 value), one rounding per hop, and final values
  // are widened into data as they land (the owned chunk after its last addition, the others as
  // the all-gather delivers them), while still in cache. No pass over the whole buffer.
  wire16_.resize(static_cast<std::size_t>(job.n));
  std::uint16_t* w = wire16_.data();
  const float* own = job.data;
  for (std::int64_t i = chunk_begin(job.n, world_, rank_);
       i < chunk_begin(job.n, world_, rank_ + 1); ++i) {
    w[i] = f32_to_bf16(own[i]);  // vectorised
  }
  stream(
      w, job.n,
      [w, own](std::uint16_t* dst, const std::uint16_t* src, std::size_t count) {
        const float* mine = own + (dst - w);
        for (std::size_t i = 0; i < count; ++i) dst[i] = f32_to_bf16(bf16_to_f32(src[i]) + mine[i]);
      },
      [w, data = job.data](std::uint16_t* p, std::size_t count) {
        float* out = data + (p - w);
        for (std::size_t i = 0; i < count; ++i) out[i] = bf16_to_f32(p[i]);
      });
}

// One non-blocking send or receive loop: moves what the socket takes now. False when the
// socket would block before anything moved. Throws Error naming the peer when it is gone.
bool TcpRing::pump(int fd, bool sending, char* p, std::size_t len, std::size_t* moved) {
  *moved = 0;
  while (*moved < len) {
    ssize_t k = sending ? send(fd, p + *moved, len - *moved, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(fd, p + *moved, len - *moved, MSG_DONTWAIT);
    if (k > 0) {
      *moved += static_cast<std::size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    const int peer = sending ? right() : left();
    const std::string why = k == 0 ? "closed the connection" : cat("failed: ", errno_text(errno));
    throw_error("rank ", rank_, ": gradient all-reduce: the TCP ring connection with rank ", peer,
                " (", sending ? "right" : "left", " neighbour) ", why,
                " — that process has probably died or aborted");
  }
  return *moved > 0;
}

template <class T, class Add, class Land>
void TcpRing::stream(T* base, std::int64_t n, Add add, Land land) {
  const int w = world_, r = rank_, steps = 2 * (w - 1);
  auto mod = [w](int x) { return ((x % w) + w) % w; };
  auto first = [n, w](int c) { return chunk_begin(n, w, c); };  // chunk c: [first(c), first(c+1))
  // Steps [0, w-1) reduce-scatter, [w-1, 2w-2) all-gather. What is sent at step t+1 is what
  // was received at step t, so the send stream may run up to the processed receive stream.
  // After step w-2 this rank holds the final sum of chunk r+1; land() sees every final value
  // once: that chunk as its last additions are made, the others as the all-gather brings them.
  auto send_chunk = [&](int t) { return t < w - 1 ? mod(r - t) : mod(r + 1 - (t - (w - 1))); };
  auto recv_chunk = [&](int t) { return t < w - 1 ? mod(r - t - 1) : mod(r - (t - (w - 1))); };
  auto bytes = [&](int c) { return static_cast<std::size_t>(first(c + 1) - first(c)) * sizeof(T); };
  auto at = [&](int c) { return reinterpret_cast<char*>(base + first(c)); };
  int st = 0, rt = 0;              // current send / receive step
  std::size_t sent = 0;            // bytes of send step st sent
  std::size_t got = 0, added = 0;  // bytes of receive step rt received / processed
  std::size_t staged = 0;          // of `got`, bytes waiting in staging_ to be added
  while (true) {
    while (st < steps && sent == bytes(send_chunk(st))) ++st, sent = 0;
    while (rt < steps && added == bytes(recv_chunk(rt))) ++rt, got = added = 0;
    if (st == steps && rt == steps) return;
    bool moved_any = false;
    std::size_t sendable = 0;
    if (st < steps) {
      std::size_t total = bytes(send_chunk(st));
      sendable = (st == 0 || rt > st - 1 ? total : added) - sent;
      std::size_t moved = 0;
      if (sendable > 0 && pump(right_fd_, true, at(send_chunk(st)) + sent, sendable, &moved)) {
        sent += moved;
        moved_any = true;
      }
    }
    if (rt < steps) {
      const std::size_t total = bytes(recv_chunk(rt));
      char* dst = at(recv_chunk(rt));
      std::size_t moved = 0;
      if (rt >= w - 1) {  // all-gather: final sums go straight into place
        if (pump(left_fd_, false, dst + got, total - got, &moved)) {
          got += moved;
          const std::size_t whole = got / sizeof(T) * sizeof(T);  // TCP may split an element
          land(reinterpret_cast<T*>(dst + added), (whole - added) / sizeof(T));
          added = whole;
          moved_any = true;
        }
      } else {
        std::size_t room = std::min(staging_.size() - staged, total - got);
        if (pump(left_fd_, false, staging_.data() + staged, room, &moved)) {
          got += moved;
          staged += moved;
          moved_any = true;
        }
        if (staged == staging_.size() || (got == total && staged > 0)) {
          add(reinterpret_cast<T*>(dst + added), reinterpret_cast<const T*>(staging_.data()),
              staged / sizeof(T));
          if (rt == w - 2) land(reinterpret_cast<T*>(dst + added), staged / sizeof(T));
          added += staged;
          staged = 0;
          moved_any = true;
        }
      }
    }
    if (moved_any) continue;
    pollfd fds[2] = {{right_fd_, POLLOUT, 0}, {left_fd_, POLLIN, 0}};
    if (sendable == 0) fds[0].fd = -1;
    if (rt == steps) fds[1].fd = -1;
    int k = poll(fds, 2, 200);
    if (k < 0 && errno != EINTR) {
      throw_error("rank ", rank_, ": gradient all-reduce: poll(): ", errno_text(errno));
    }
    if (stopping_.load()) throw_error("rank ", rank_, ": gradient ring shut down");
  }
}

}  // namespace bertfit
