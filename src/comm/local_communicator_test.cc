// LocalCommunicator and the launcher detection: collectives are the identity, handles follow
// the same rules as under MPI, and make_communicator picks the local one outside a launcher.
#include "comm/local_communicator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "base/error.h"
#include "comm/communicator.h"

namespace bertfit {
namespace {

// Sets environment variables for one test and restores them afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(LocalCommunicator, CollectivesAreIdentity) {
  LocalCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world(), 1);
  EXPECT_EQ(comm.local_rank(), 0);
  EXPECT_EQ(comm.local_world(), 1);
  std::vector<float> f = {1.5f, -2.0f, 3.25f};
  std::vector<double> d = {1e300, -0.5};
  comm.allreduce_sum(f.data(), 3);
  comm.allreduce_sum(d.data(), 2);
  EXPECT_EQ(f, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(d, (std::vector<double>{1e300, -0.5}));
  char bytes[4] = {'a', 'b', 'c', 'd'};
  comm.broadcast(bytes, 4, 0);
  EXPECT_EQ(std::string(bytes, 4), "abcd");
  EXPECT_EQ(comm.allgatherv({4.0f, 5.0f}), (std::vector<float>{4.0f, 5.0f}));
  EXPECT_TRUE(comm.allgatherv({}).empty());
  comm.barrier();
}

// One process: the set-up vote passes or throws the error as the job's (printed once).
TEST(LocalCommunicator, SetupVoteOfOne) {
  LocalCommunicator comm;
  EXPECT_NO_THROW(agree_on_setup(comm, ""));
  try {
    agree_on_setup(comm, "--lr differs");
    FAIL() << "a failed set-up passed the vote";
  } catch (const JobError& e) {
    EXPECT_STREQ(e.what(), "--lr differs");
    EXPECT_EQ(e.exit_code(), 1);
  }
}

TEST(LocalCommunicator, NonBlockingHandles) {
  LocalCommunicator comm;
  std::vector<float> g = {0.1f, 0.2f, 0.3f};
  auto a = comm.start_allreduce(g.data(), 3, WireDType::kF32);
  auto b = comm.start_allreduce(g.data(), 3, WireDType::kBF16);
  EXPECT_NE(a, b);
  comm.progress();
  comm.wait(b);  // any order
  comm.wait(a);
  // One process: nothing is transported, so even the bf16 wire leaves the values exact.
  EXPECT_EQ(g, (std::vector<float>{0.1f, 0.2f, 0.3f}));
  EXPECT_DEATH(comm.wait(a), "already waited");
}

TEST(LocalCommunicator, BroadcastFromMissingRootIsAProgrammingError) {
  LocalCommunicator comm;
  int x = 0;
  EXPECT_DEATH(comm.broadcast(&x, sizeof(x), 1), "not a rank");
}

TEST(DetectLaunch, RecognisesLaunchers) {
  ScopedEnv a("OMPI_COMM_WORLD_SIZE", nullptr), b("OMPI_COMM_WORLD_RANK", nullptr),
      c("PMI_SIZE", nullptr), d("PMI_RANK", nullptr), e("PMIX_RANK", nullptr);
  EXPECT_FALSE(detect_launch().under_launcher);
  {
    ScopedEnv size("OMPI_COMM_WORLD_SIZE", "4"), rank("OMPI_COMM_WORLD_RANK", "3");
    LaunchInfo info = detect_launch();
    EXPECT_TRUE(info.under_launcher);
    EXPECT_EQ(info.world, 4);
    EXPECT_EQ(info.rank, 3);
    EXPECT_EQ(info.variable, "OMPI_COMM_WORLD_SIZE");
  }
  {
    ScopedEnv size("PMI_SIZE", "2"), rank("PMI_RANK", "1");
    EXPECT_EQ(detect_launch().world, 2);
  }
  {
    ScopedEnv rank("PMIX_RANK", "0");  // PMIx gives no size: unknown
    LaunchInfo info = detect_launch();
    EXPECT_TRUE(info.under_launcher);
    EXPECT_EQ(info.world, -1);
    EXPECT_EQ(info.variable, "PMIX_RANK");
  }
}

TEST(MakeCommunicator, LocalOutsideALauncher) {
  ScopedEnv a("OMPI_COMM_WORLD_SIZE", nullptr), b("OMPI_COMM_WORLD_RANK", nullptr),
      c("PMI_SIZE", nullptr), d("PMI_RANK", nullptr), e("PMIX_RANK", nullptr);
  auto comm = make_communicator({});
  EXPECT_EQ(comm->world(), 1);
  EXPECT_EQ(comm->backend(), "local");
  std::string text = describe(*comm);
  EXPECT_NE(text.find("rank 0 of 1 (local 0 of 1 on host "), std::string::npos) << text;
  EXPECT_NE(text.find("local"), std::string::npos);
}

TEST(MakeCommunicator, SrunWithoutPmixFailsClearly) {
  ScopedEnv a("OMPI_COMM_WORLD_SIZE", nullptr), b("OMPI_COMM_WORLD_RANK", nullptr),
      c("PMI_SIZE", nullptr), d("PMI_RANK", nullptr), e("PMIX_RANK", nullptr);
  {
    ScopedEnv tasks("SLURM_STEP_NUM_TASKS", "2");
    EXPECT_EQ(detect_launch().slurm_step_tasks, 2);
    try {
      make_communicator({});
      FAIL() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("one of 2 tasks"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("srun --mpi=pmix"), std::string::npos) << e.what();
    }
  }
  // One task of a step (or a batch script, which has no step variable) runs alone.
  ScopedEnv one("SLURM_STEP_NUM_TASKS", "1");
  EXPECT_EQ(make_communicator({})->world(), 1);
}

TEST(MakeCommunicator, RejectsNonPositiveTimeout) {
  CommOptions options;
  options.timeout_seconds = 0;
  EXPECT_THROW(make_communicator(options), Error);
}

TEST(MakeCommunicator, MultiRankLaunchWithoutMpiFailsClearly) {
  if (built_with_mpi()) GTEST_SKIP() << "this build has MPI; the error path is compiled out";
  ScopedEnv size("OMPI_COMM_WORLD_SIZE", "2"), rank("OMPI_COMM_WORLD_RANK", "1");
  try {
    make_communicator({});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("built without MPI support"), std::string::npos)
        << e.what();
  }
}

TEST(Names, WireAndProgress) {
  EXPECT_STREQ(wire_dtype_name(WireDType::kBF16), "bf16");
  EXPECT_STREQ(wire_dtype_name(WireDType::kF32), "f32");
  EXPECT_STREQ(progress_mode_name(ProgressMode::kCommThread), "comm thread");
  EXPECT_STREQ(progress_mode_name(ProgressMode::kTestBetweenLayers), "test between layers");
}

}  // namespace
}  // namespace bertfit
