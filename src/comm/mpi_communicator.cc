// MpiCommunicator: set-up, tear-down and the collectives, each expressed as an Op (see
// mpi_communicator_impl.h); the progress machinery is in mpi_progress.cc.
#include "comm/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "base/check.h"
#include "base/dtype.h"
#include "base/log.h"
#include "base/timer.h"
#include "comm/mpi_communicator_impl.h"
#include "comm/mpi_runtime.h"

namespace bertfit {
namespace {

// Posts one request per chunk of at most kMaxChunk elements; stops at the first error.
template <class PostChunk>
int post_chunks(std::int64_t n, std::vector<MPI_Request>& requests, PostChunk&& post_chunk) {
  for (std::int64_t begin = 0; begin < n; begin += mpi::kMaxChunk) {
    int count = static_cast<int>(std::min(mpi::kMaxChunk, n - begin));
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = post_chunk(begin, count, &request);
    if (rc != MPI_SUCCESS) return rc;
    requests.push_back(request);
  }
  return MPI_SUCCESS;
}

}  // namespace

MpiCommunicator::MpiCommunicator(const CommOptions& options, int /*delegated*/)
    : options_(options), mode_(options.progress) {
  int provided = mpi::ensure_initialized();
  {
    std::lock_guard<std::mutex> guard(mpi::lock());
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_);
  }
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::lock_guard<std::mutex> guard(mpi::lock());
    MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &request);
  }
  wait_setup_request(request, "communicator set-up (MPI_Comm_idup)");
  {
    std::lock_guard<std::mutex> guard(mpi::lock());
    MPI_Comm_idup(MPI_COMM_WORLD, &beacon_, &request);
  }
  wait_setup_request(request, "communicator set-up (MPI_Comm_idup)");
  std::lock_guard<std::mutex> guard(mpi::lock());
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(beacon_, MPI_ERRORS_RETURN);
  // Ranks that share memory (the launcher's notion of a node: each emulated node counts as one).
  MPI_Comm local = MPI_COMM_NULL;
  int rc = MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  if (rc != MPI_SUCCESS) {
    fail(cat("rank ", rank_, ": MPI_Comm_split_type failed: ", mpi::error_string(rc)));
  }
  MPI_Comm_rank(local, &local_rank_);
  MPI_Comm_size(local, &local_world_);
  MPI_Comm_free(&local);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  host_.assign(name, static_cast<std::size_t>(length));
  version_ = mpi::library_version();
  if (mode_ == ProgressMode::kCommThread && provided < MPI_THREAD_SERIALIZED) {
    log_warn("the MPI library provides no thread support (level ", provided,
             "); driving progress between layers instead of from a comm thread");
    mode_ = ProgressMode::kTestBetweenLayers;
  }
}

MpiCommunicator::MpiCommunicator(const CommOptions& options) : MpiCommunicator(options, 0) {
  if (mode_ == ProgressMode::kCommThread) thread_ = std::thread([this] { comm_thread_main(); });
}

MpiCommunicator::~MpiCommunicator() {
  stop_comm_thread();
  std::size_t outstanding = 0;
  for (const auto& [handle, op] : handles_) outstanding += op->state.load() < kDone ? 1 : 0;
  outstanding += active_.size();
  if (!failed_ && outstanding > 0) {
    // An exception on this rank interrupted a step: the peers would wait for requests this rank
    // will never complete, so end the job now rather than after their timeout.
    std::fprintf(stderr,
                 "error: rank %d: communicator destroyed with %zu operation(s) in flight (an error "
                 "on this rank interrupted a collective); aborting the job\n",
                 rank_, outstanding);
    failed_ = true;
  }
  std::lock_guard<std::mutex> guard(mpi::lock());
  if (failed_) {
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (beacon_ != MPI_COMM_NULL) MPI_Comm_free(&beacon_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

double MpiCommunicator::thread_cpu_seconds() const {
  // thread_ changes only in the constructor and in fail(), on this (the caller's) thread.
  if (!thread_.joinable()) return 0;
  return bertfit::thread_cpu_seconds(const_cast<std::thread&>(thread_).native_handle());
}

std::string MpiCommunicator::backend() const {
  return cat("MPI (", version_, ", progress: ", progress_mode_name(mode_), ")");
}

void MpiCommunicator::allreduce_sum(float* data, std::int64_t n) {
  CHECK(n >= 0 && (data != nullptr || n == 0), "allreduce_sum: n=", n);
  wait_op(submit("all-reduce", [this, data, n](Op& op) {
    return post_chunks(n, op.requests, [&](std::int64_t begin, int count, MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, data + begin, count, MPI_FLOAT, MPI_SUM, comm_, r);
    });
  }));
}

void MpiCommunicator::allreduce_sum(double* data, std::int64_t n) {
  CHECK(n >= 0 && (data != nullptr || n == 0), "allreduce_sum: n=", n);
  wait_op(submit("all-reduce", [this, data, n](Op& op) {
    return post_chunks(n, op.requests, [&](std::int64_t begin, int count, MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, data + begin, count, MPI_DOUBLE, MPI_SUM, comm_, r);
    });
  }));
}

void MpiCommunicator::broadcast(void* data, std::int64_t bytes, int root) {
  CHECK(bytes >= 0 && (data != nullptr || bytes == 0), "broadcast: bytes=", bytes);
  CHECK(root >= 0 && root < world_, "broadcast: root ", root, " is not a rank of ", world_);
  auto* base = static_cast<char*>(data);
  wait_op(submit("broadcast", [this, base, bytes, root](Op& op) {
    return post_chunks(bytes, op.requests, [&](std::int64_t begin, int count, MPI_Request* r) {
      return MPI_Ibcast(base + begin, count, MPI_BYTE, root, comm_, r);
    });
  }));
}

std::vector<float> MpiCommunicator::allgatherv(const std::vector<float>& local) {
  // First every rank's length, then the data with displacements from those lengths.
  OpPtr sizes = submit("all-gather (sizes)", [this, &local](Op& op) {
    op.words.assign(static_cast<std::size_t>(world_) + 1, 0);
    op.words[static_cast<std::size_t>(world_)] = static_cast<std::int64_t>(local.size());
    op.requests.push_back(MPI_REQUEST_NULL);
    return MPI_Iallgather(&op.words[static_cast<std::size_t>(world_)], 1, MPI_INT64_T,
                          op.words.data(), 1, MPI_INT64_T, comm_, &op.requests.back());
  });
  wait_op(sizes);
  std::vector<int> counts(static_cast<std::size_t>(world_)), displs(counts.size());
  std::int64_t total = 0;
  for (int r = 0; r < world_; ++r) {
    displs[static_cast<std::size_t>(r)] = static_cast<int>(total);
    counts[static_cast<std::size_t>(r)] =
        static_cast<int>(sizes->words[static_cast<std::size_t>(r)]);
    total += sizes->words[static_cast<std::size_t>(r)];
    if (total > INT_MAX) {
      throw_error("all-gather of ", total, "+ values exceeds MPI's int count limit (", INT_MAX,
                  ")");
    }
  }
  std::vector<float> result(static_cast<std::size_t>(total));
  wait_op(submit("all-gather", [&](Op& op) {
    op.requests.push_back(MPI_REQUEST_NULL);
    return MPI_Iallgatherv(local.data(), static_cast<int>(local.size()), MPI_FLOAT, result.data(),
                           counts.data(), displs.data(), MPI_FLOAT, comm_, &op.requests.back());
  }));
  return result;
}

void MpiCommunicator::barrier() {
  wait_op(submit("barrier", [this](Op& op) {
    op.moves_data = false;
    op.requests.push_back(MPI_REQUEST_NULL);
    return MPI_Ibarrier(comm_, &op.requests.back());
  }));
}

Communicator::Handle MpiCommunicator::start_allreduce(float* data, std::int64_t n, WireDType wire) {
  CHECK(n >= 0 && (data != nullptr || n == 0), "start_allreduce: n=", n);
  OpPtr op;
  if (wire == WireDType::kF32) {
    op = submit("gradient all-reduce", [this, data, n](Op& o) {
      return post_chunks(n, o.requests, [&](std::int64_t begin, int count, MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, data + begin, count, MPI_FLOAT, MPI_SUM, comm_, r);
      });
    });
  } else {
    // Rounded to bf16 where the op is posted (comm thread or caller), summed with the bf16
    // operator, widened back into the fp32 buffer on completion.
    op = submit(
        "gradient all-reduce (bf16)",
        [this, data, n](Op& o) {
          o.bf16.resize(static_cast<std::size_t>(n));
          std::uint16_t* wire_data = o.bf16.data();
          for (std::int64_t i = 0; i < n; ++i) wire_data[i] = f32_to_bf16(data[i]);  // vectorised
          return post_chunks(n, o.requests, [&](std::int64_t begin, int count, MPI_Request* r) {
            return MPI_Iallreduce(MPI_IN_PLACE, wire_data + begin, count, MPI_UINT16_T,
                                  mpi::bf16_sum_op(), comm_, r);
          });
        },
        [data, n](Op& o) {
          const std::uint16_t* wire_data = o.bf16.data();
          for (std::int64_t i = 0; i < n; ++i) data[i] = bf16_to_f32(wire_data[i]);
          o.bf16 = {};
        });
  }
  Handle handle = next_handle_++;
  handles_.emplace(handle, std::move(op));
  return handle;
}

void MpiCommunicator::wait(Handle h) {
  auto it = handles_.find(h);
  CHECK(it != handles_.end(), "wait: unknown or already waited handle ", h);
  OpPtr op = std::move(it->second);
  handles_.erase(it);
  wait_op(op);
}

void MpiCommunicator::abort(const std::string& message, int code) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
  mpi::mark_failed(code);
  // Take the MPI lock if the comm thread releases it soon; abort regardless after a second.
  std::unique_lock<std::mutex> guard(mpi::lock(), std::defer_lock);
  for (int i = 0; i < 1000 && !guard.try_lock(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  MPI_Abort(MPI_COMM_WORLD, code == 0 ? 1 : code);
  std::_Exit(code == 0 ? 1 : code);
}

std::unique_ptr<Communicator> make_mpi_communicator(const CommOptions& options) {
  return std::make_unique<MpiCommunicator>(options);
}

}  // namespace bertfit
