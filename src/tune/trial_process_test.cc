// Trial processes (trial_process.h) with /bin/sh children: environment, affinity, timeouts,
// the group killed, the failure's last line.
#include "tune/trial_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>

namespace bertfit::tune {
namespace {

ChildSpec shell(const std::string& script) {
  const std::string dir = ::testing::TempDir();
  const std::string tag = std::to_string(getpid()) + "_" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return {{"/bin/sh", "-c", script}, {}, {}, dir + tag + ".out", dir + tag + ".err"};
}

TEST(TrialProcess, KnobVariablesAreClearedAndTheSettingsSet) {
  setenv("OMP_WAIT_POLICY", "passive", 1);
  setenv("LD_PRELOAD", "", 1);
  ChildSpec spec = shell(
      "echo wait=${OMP_WAIT_POLICY-unset} bind=$OMP_PROC_BIND; env | grep -c '^LD_PRELOAD=' ; "
      "true");
  spec.env = {{"OMP_PROC_BIND", "close"}};
  Child child(spec);
  ASSERT_EQ(child.wait(10, nullptr), Child::End::kExited);
  EXPECT_EQ(child.exit_code(), 0);
  EXPECT_EQ(child.out(), "wait=unset bind=close\n0\n");
  unsetenv("OMP_WAIT_POLICY");
  unsetenv("LD_PRELOAD");
}

TEST(TrialProcess, RunsOnTheCoresItWasGiven) {
  ChildSpec spec = shell("grep Cpus_allowed_list /proc/self/status");
  spec.cores = {0};
  Child child(spec);
  ASSERT_EQ(child.wait(10, nullptr), Child::End::kExited);
  EXPECT_EQ(last_line(child.out()), "Cpus_allowed_list:\t0");
}

TEST(TrialProcess, ATimeoutKillsTheWholeGroup) {
  // The shell starts a grandchild that would outlive a kill of the shell alone.
  ChildSpec spec = shell("sleep 30 & echo $! ; wait");
  Child child(spec);
  EXPECT_TRUE(
      child.wait_for_stderr([&](const std::string&) { return !child.out().empty(); }, 10, nullptr));
  const pid_t grandchild = std::atoi(child.out().c_str());
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(child.wait(0.2, nullptr), Child::End::kTimeout);
  child.kill_group(1.0);
  EXPECT_FALSE(child.running());
  // The grandchild is gone too (or a zombie of init's on its way out).
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = kill(grandchild, 0) != 0;
    if (!gone) usleep(20000);
  }
  EXPECT_TRUE(gone);
}

TEST(TrialProcess, AStopRequestEndsTheWaitAndAFailureKeepsItsLastLine) {
  Child sleeper(shell("sleep 30"));
  EXPECT_EQ(sleeper.wait(10, [] { return true; }), Child::End::kStopped);
  sleeper.kill_group(1.0);
  EXPECT_EQ(sleeper.exit_code(), 128 + SIGTERM);
  Child failing(
      shell("echo working >&2; echo 'bertfit: error: --model x: no such folder' >&2; "
            "echo >&2; exit 3"));
  ASSERT_EQ(failing.wait(10, nullptr), Child::End::kExited);
  EXPECT_EQ(failing.exit_code(), 3);
  EXPECT_EQ(last_line(failing.err()), "bertfit: error: --model x: no such folder");
  EXPECT_EQ(last_line(""), "");
  EXPECT_EQ(last_line("one"), "one");
  EXPECT_EQ(last_line("---\nmpirun detected a failure\n---------\n\n"),
            "mpirun detected a failure");
  EXPECT_EQ(last_line("-----\n"), "");
}

TEST(TrialProcess, AProgramThatCannotStartSaysSo) {
  ChildSpec spec = shell("");
  spec.argv = {"/nonexistent/bertfit"};
  Child child(spec);
  ASSERT_EQ(child.wait(10, nullptr), Child::End::kExited);
  EXPECT_EQ(child.exit_code(), 127);
  EXPECT_EQ(last_line(child.err()), "tune: cannot start the trial's program");
}

}  // namespace
}  // namespace bertfit::tune
