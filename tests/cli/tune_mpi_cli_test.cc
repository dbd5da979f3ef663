// `bertfit tune train` over ranks through the binary: trials under mpirun (-np 1 and 2), the
// global batch kept by micro_batch and --grad-accum, the data flags passed on. Its own target
// because Open MPI's allocations at exit are leaks to AddressSanitizer (label mpi, leak
// detection off, as the other mpirun tests).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "tune_cli_util.h"

namespace bertfit::testing {
namespace {

TEST(TuneCli, TrainKeepsTheGlobalBatchAndRunsRanksUnderMpirun) {
  TempDir tmp;
  init_tiny_model(tmp / "m");
  std::string rows = "sentence\tlabel\n";
  for (int i = 0; i < 48; ++i)
    rows += "sentence number " + std::to_string(i) + "\t" + std::to_string(i % 2) + "\n";
  write_text(tmp / "train.tsv", rows);
  const std::string out = tmp / "t";
  const std::string data =
      " --train-file " + (tmp / "train.tsv") + " --text-a-column sentence --label-column label";
  const RunResult r = run_bertfit("tune train --model " + (tmp / "m") + data +
                                  " --batch-size 8 --grad-accum 2 --trials 3 --sampler grid"
                                  " --fix ranks=1,2 --fix micro_batch=4 --fix bucket_mb=8"
                                  " --fix wait=default --fix bind=none --fix allocator=glibc"
                                  " --fix precision=fp32 --output " +
                                  out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> trials = trials_of(out);
  ASSERT_EQ(trials.size(), 2u);  // the grid: ranks 1 and 2, nothing else
  for (const nlohmann::json& t : trials) {
    ASSERT_EQ(t["status"], "ok") << t.dump();
    EXPECT_EQ(t["setting"]["micro_batch"], "4");
    EXPECT_EQ(t["metrics"]["processes"], std::stoi(t["setting"]["ranks"].get<std::string>()));
  }
  const nlohmann::json tuned = nlohmann::json::parse(read_text(out + "/tuned.json"));
  EXPECT_EQ(tuned["context"]["global_batch"], 16);
  // The command line carries the data flags and a step of 16: 4 per pass, accumulated.
  const std::string line = tuned["command_line"];
  EXPECT_NE(line.find("--train-file"), std::string::npos) << line;
  EXPECT_NE(line.find("--batch-size 4 --grad-accum"), std::string::npos) << line;
}

}  // namespace
}  // namespace bertfit::testing
