// TcpRing: sum all-reduce of float buffers over a ring of plain TCP connections, one thread
// that sleeps in poll() whenever the network has nothing for it. MpiCommunicator uses it for
// the gradient all-reduce (start_allreduce) unless told otherwise (CommOptions::grad_transport);
// MPI still launches the job, exchanges the ring's addresses and carries every other
// collective. No MPI here: the set-up data is passed in by the caller.
//
// Why: a rank's communication CPU comes out of its compute under a CPU quota, and this ring
// takes about a third less of it than Open MPI's TCP path for the same bytes (figures in
// docs/PERFORMANCE.md, "Data-parallel scaling"). Here every byte is written once by send() from the
// gradient buffer (or its bf16 copy) and read once by recv() into a small staging buffer, and the
// thread blocks in the kernel while the link is busy.
//
// Algorithm: ring reduce-scatter then all-gather over world chunks of the buffer, streamed: the
// chunk a rank forwards at step t+1 is the one it received (and added to) at step t, so it is
// forwarded piece by piece as soon as each piece is reduced, and both directions of every link
// stay busy. Each chunk's sum is formed once, by one rank, and copied to the others, so every
// rank ends with bitwise the same result. bf16 wire: the rank where a chunk starts rounds its
// values to bf16; each later rank adds its own fp32 values to the received bf16 partial sums
// in fp32 and rounds once before forwarding (one rounding per hop, one fewer than the MPI bf16
// operator, which rounds every input first), and the final bf16 sums are widened into the
// buffer as they arrive.
//
// Failure: a peer that dies closes its sockets, so its neighbours fail the current all-reduce
// (and every later one) with a message naming it; the caller's deadline covers a peer that
// stalls. Addresses are IPv4; a ring that cannot connect throws from connect(), and the caller
// falls back to MPI.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"

namespace bertfit {

class TcpRing {
 public:
  // Bytes of one rank's address record (address(), and each slice of connect()'s input).
  static constexpr std::size_t kAddressBytes = 96;

  // Opens a listening socket on every IPv4 address (an ephemeral port). Throws Error.
  TcpRing(int rank, int world);
  ~TcpRing();  // stops the thread; pending all-reduces are reported as failed
  TcpRing(const TcpRing&) = delete;
  TcpRing& operator=(const TcpRing&) = delete;

  // This rank's record: port and IPv4 addresses (non-loopback first, then loopback).
  std::vector<std::uint8_t> address() const;

  // Connects to rank+1 and accepts rank-1 (mod world). all_addresses: every rank's record in
  // rank order (world * kAddressBytes); token: the same random number on every rank, which
  // both ends of each connection check. Tries the right neighbour's addresses in order. Throws
  // Error naming the neighbour on failure or after timeout_seconds. Starts the ring thread.
  void connect(const std::vector<std::uint8_t>& all_addresses, std::uint64_t token,
               double timeout_seconds);

  // Queues a sum all-reduce of data[0..n) in place; all ranks queue the same sequence.
  // done(error) runs on the ring thread when it has finished (error empty) or failed.
  void start(float* data, std::int64_t n, WireDType wire,
             std::function<void(const std::string& error)> done);

  double thread_cpu_seconds() const;  // the ring thread's CPU time so far
  int left() const { return (rank_ + world_ - 1) % world_; }
  int right() const { return (rank_ + 1) % world_; }

 private:
  struct Job {
    float* data = nullptr;
    std::int64_t n = 0;
    WireDType wire = WireDType::kF32;
    std::function<void(const std::string&)> done;
  };

  void thread_main();
  void run(const Job& job);  // throws Error
  // The ring all-reduce over base[0..n): add(dst, src, count) folds a received partial sum
  // into dst; land(p, count) is shown every final value once, as soon as it is in base.
  template <class T, class Add, class Land>
  void stream(T* base, std::int64_t n, Add add, Land land);
  bool pump(int fd, bool sending, char* p, std::size_t len, std::size_t* moved);

  int rank_, world_;
  int listen_fd_ = -1, left_fd_ = -1, right_fd_ = -1;
  int port_ = 0;
  std::vector<std::uint32_t> addresses_;  // network byte order
  std::vector<std::uint16_t> wire16_;     // bf16 partial and final sums of the buffer
  std::vector<char> staging_;             // received partial sums awaiting addition

  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};
  std::string broken_;  // first failure: later jobs fail with it at once
};

}  // namespace bertfit
