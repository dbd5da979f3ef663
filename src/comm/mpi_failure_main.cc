// Failure scenarios for ctest (run under mpirun -np 2 through expect_failure.sh):
//   stall_test   rank 1 sleeps past rank 0's 2 s timeout, progress between layers: rank 0 must
//                fail naming rank 1 as not responding.
//   stall_thread the same with a comm thread: rank 1's comm thread answers the liveness query,
//                so rank 0 names rank 1 as alive but not at the collective.
//   stall_grad   stall_thread for a non-blocking gradient all-reduce (start_allreduce, bf16
//                wire): its wait has the same deadline and liveness query.
//   die          rank 1 exits abruptly before a collective: the job must end non-zero.
// In every case the job must end, non-zero, well before rank 1 would have continued.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "base/error.h"
#include "comm/communicator.h"

int main(int argc, char** argv) {
  using namespace bertfit;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s stall_test|stall_thread|stall_grad|die\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  CommOptions options;
  options.timeout_seconds = scenario == "die" ? 10 : 2;
  options.progress =
      scenario == "stall_test" ? ProgressMode::kTestBetweenLayers : ProgressMode::kCommThread;
  try {
    auto comm = make_communicator(options);
    if (comm->world() != 2) {
      std::fprintf(stderr, "run under mpirun -np 2\n");
      return 2;
    }
    float warm = 1.0f;
    comm->allreduce_sum(&warm, 1);  // a healthy collective first
    if (comm->rank() == 1) {
      if (scenario == "die") {
        std::fprintf(stderr, "rank 1: exiting abruptly\n");
        std::_Exit(3);
      }
      std::this_thread::sleep_for(std::chrono::seconds(30));
    }
    float x = 1.0f;
    if (scenario == "stall_grad") {
      comm->wait(comm->start_allreduce(&x, 1, WireDType::kBF16));
    } else {
      comm->allreduce_sum(&x, 1);
    }
    std::fprintf(stderr, "rank %d: the collective completed, which this scenario must prevent\n",
                 comm->rank());
    return 0;
  } catch (const Error& e) {
    // What the trainer does: report and leave; the failed communicator aborts the job.
    std::fprintf(stderr, "caught: %s\n", e.what());
    return 1;
  }
}
