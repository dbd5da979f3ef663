// `--config tuned.json` through the binary (apps/bertfit/tuned_config.h), with files written by
// hand in tune's format: the file's flags and environment reach the process (bench reports the
// OpenMP variables and the allocator it ran under; serve's /info its batch limit; train's
// checkpoint its batch), the command line and the user's environment win over the file, a flag
// a command does not have is left out with a note, and every bad file is one line naming it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "serve_client.h"

namespace bertfit::testing {
namespace {

const char* kTcmalloc = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4";

// A tuned.json as `bertfit tune` writes it, with these settings and context.
std::string tuned_json(const nlohmann::json& settings, const nlohmann::json& context = {}) {
  nlohmann::json j{{"bertfit_tune", 1},
                   {"command", "infer"},
                   {"objective", "throughput"},
                   {"unit", "samples/s"},
                   {"model", "m"},
                   {"settings", settings},
                   {"machine", nlohmann::json::object()},
                   {"measured", nlohmann::json::object()},
                   {"importance", nlohmann::json::object()},
                   {"command_line", "bertfit bench infer"}};
  if (!context.is_null()) j["context"] = context;
  return j.dump(2) + "\n";
}

class TunedConfigCli : public ::testing::Test {
 protected:
  void SetUp() override {
    // The variables the files set start unset, as in a user's plain shell.
    for (const char* v :
         {"OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES", "LD_PRELOAD", "BERTFIT_TUNED_ENV"}) {
      ::unsetenv(v);
    }
    init_tiny_model(tmp_ / "m");
  }
  std::string file(const std::string& name, const std::string& text) {
    write_text(tmp_ / name, text);
    return tmp_ / name;
  }
  // bench infer on the tiny model: small and quick; the figures are not looked at.
  RunResult bench(const std::string& args) {
    return run_bertfit("bench infer --model " + (tmp_ / "m") +
                       " --batch-size 2 --seq-len 9 --steps 1 --warmup 0 " + args);
  }
  // The precision bench runs when asked for bf16: bf16 with native products, else fp32.
  std::string runnable_bf16() {
    RunResult r = bench("--precision bf16");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["precision"].get<std::string>() : "";
  }
  // Labelled rows of text: enough for a training step of 8.
  std::string rows() {
    std::string text = "text\tlabel\n";
    for (int i = 0; i < 12; ++i)
      text += "row number " + std::to_string(i) + "\t" + std::to_string(i % 2) + "\n";
    write_text(tmp_ / "d.tsv", text);
    return tmp_ / "d.tsv";
  }
  TempDir tmp_;
};

TEST_F(TunedConfigCli, BenchRunsWithTheFilesFlagsAndEnvironment) {
  const std::string precision = runnable_bf16();
  ASSERT_FALSE(precision.empty());
  const std::string f = file(
      "t.json",
      tuned_json(
          {{"layout", "1x1"}, {"precision", precision}, {"wait", "active"}, {"bind", "close"}}));
  RunResult r = bench("--config " + f);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["precision"], precision);
  EXPECT_EQ(j["omp_env"]["OMP_WAIT_POLICY"], "active") << j["omp_env"];
  EXPECT_EQ(j["omp_env"]["OMP_PROC_BIND"], "close") << j["omp_env"];
  EXPECT_EQ(j["omp_env"]["OMP_PLACES"], "cores") << j["omp_env"];
  EXPECT_EQ(j["omp_proc_bind"], "close");  // libgomp loaded with it: the binary started again
  EXPECT_EQ(j["allocator"], "glibc");
  // Without the file: none of it (the default threads are the machine's share).
  const nlohmann::json plain = nlohmann::json::parse(bench("").out);
  EXPECT_FALSE(plain["omp_env"].contains("OMP_WAIT_POLICY")) << plain["omp_env"];
  EXPECT_EQ(plain["omp_proc_bind"], "false");
  EXPECT_EQ(plain["precision"], "fp32");
}

TEST_F(TunedConfigCli, TheAllocatorIsPreloaded) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a sanitizer build runs under no other allocator";
#endif
  if (!std::filesystem::exists(kTcmalloc)) GTEST_SKIP() << kTcmalloc << " is not installed";
  RunResult r = bench("--config=" + file("t.json", tuned_json({{"allocator", "tcmalloc"}})));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["allocator"], "tcmalloc");
  EXPECT_EQ(nlohmann::json::parse(bench("").out)["allocator"], "glibc");
}

TEST_F(TunedConfigCli, TheCommandLineAndTheUsersEnvironmentWin) {
  const std::string f = file("t.json", tuned_json({{"layout", "1x1"}, {"wait", "active"}}));
  RunResult r = bench("--threads 2 --config " + f);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["threads"], 2);
  r = bench("--config " + f + " --threads=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["threads"], 2);

  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  r = bench("--config " + f);
  ::unsetenv("OMP_WAIT_POLICY");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["omp_env"]["OMP_WAIT_POLICY"], "passive");
  EXPECT_EQ(j["threads"], 1);  // the rest of the file applies
  EXPECT_EQ(r.err, "bertfit: --config " + f +
                       ": OMP_WAIT_POLICY=passive from the environment wins over the file's "
                       "active\n");
}

TEST_F(TunedConfigCli, ServeTakesTheBatchLimit) {
  const std::string f = file(
      "t.json",
      tuned_json({{"threads", "1"}, {"max_batch_tokens", "1024"}, {"max_batch_requests", "4"}}));
  ServeProcess server("--model " + (tmp_ / "m") + " --tokenization-workers 2 --config " + f);
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  HttpReply r = client.get("/info");
  ASSERT_EQ(r.status, 200) << r.body;
  const nlohmann::json info = nlohmann::json::parse(r.body);
  EXPECT_EQ(info["max_batch_tokens"], 1024);
  EXPECT_EQ(info["max_batch_requests"], 4);
  EXPECT_EQ(server.stop(SIGTERM), 0);
}

TEST_F(TunedConfigCli, PredictAsWithTheFlagsByHand) {
  const std::string input = rows();
  const std::string predict =
      "predict --model " + (tmp_ / "m") + " --input " + input + " --text-a-column text ";
  RunResult by_hand = run_bertfit(predict + "--precision int8");
  ASSERT_EQ(by_hand.exit_code, 0) << by_hand.err;
  if (by_hand.err.find("int8") != std::string::npos) GTEST_SKIP() << "no VNNI: " << by_hand.err;
  RunResult fp32 = run_bertfit(predict);
  ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
  ASSERT_NE(by_hand.out, fp32.out);  // int8 shows in the figures
  const std::string f =
      file("t.json", tuned_json({{"precision", "int8"}, {"max_batch_tokens", "1024"}}));
  RunResult r = run_bertfit(predict + "--config " + f);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, by_hand.out);
  EXPECT_EQ(r.err, "bertfit: --config " + f +
                       ": --max-batch-tokens 1024 does not apply to 'predict': left out\n");
}

TEST_F(TunedConfigCli, TrainTakesTheMicroBatchOfTheGlobalBatch) {
  const std::string f =
      file("t.json", tuned_json({{"micro_batch", "4"}, {"threads", "1"}}, {{"global_batch", 8}}));
  RunResult r = run_bertfit("train --model " + (tmp_ / "m") + " --output " + (tmp_ / "out") +
                            " --train-file " + rows() +
                            " --text-a-column text --label-column label --max-steps 1 "
                            "--max-seq-len 16 --eval-every never --config " +
                            f);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json state =
      nlohmann::json::parse(read_text(tmp_ / "out/checkpoint/trainer_state.json"));
  EXPECT_EQ(state["options"]["batch-size"], 4) << state["options"];
  EXPECT_EQ(state["options"]["grad-accum"], 2) << state["options"];
  EXPECT_EQ(state["options"]["threads"], 1) << state["options"];
  EXPECT_FALSE(state["options"].contains("config"));  // the run saves what the file set
}

TEST_F(TunedConfigCli, EvalAndEmbedTakeIt) {
  const std::string input = rows();
  const std::string f = file("t.json", tuned_json({{"batch_size", "8"}, {"wait", "passive"}}));
  RunResult r = run_bertfit("eval --model " + (tmp_ / "m") + " --dev-file " + input +
                            " --text-a-column text --label-column label --config " + f);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("eval_accuracy"), std::string::npos) << r.out;
  r = run_bertfit("embed --model " + (tmp_ / "m") + " --pooling mean --input " + input +
                  " --text-a-column text --config " + f);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out), 12);
  // A value the command refuses names the file its flag came from.
  const std::string int8 = file("int8.json", tuned_json({{"precision", "int8"}}));
  r = run_bertfit("train --model " + (tmp_ / "m") + " --output " + (tmp_ / "o") + " --train-file " +
                  input + " --text-a-column text --label-column label " + "--config " + int8);
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("(from --config " + int8 + ")"), std::string::npos) << r.err;
}

TEST_F(TunedConfigCli, ABadFileIsOneLineNamingIt) {
  const std::string cmd = "bench infer --model " + (tmp_ / "m") + " --config ";
  const std::string good = tuned_json({{"wait", "active"}});
  struct Case {
    std::string name, text, message;
  };
  const std::vector<Case> cases = {
      {"broken.json", "{\n  \"bertfit_tune\": 1,\n  \"settings\": {\"wait\" \"active\"}\n}\n",
       "not JSON (line 3, column 30)"},  // the end of the token "active",
      {"other.json", "{\"settings\": {}}",
       "not a file written by bertfit tune (no \"bertfit_tune\" key)"},
      {"key.json", "{\"bertfit_tune\": 1, \"setings\": {}}",
       "unknown key 'setings'; did you mean 'settings'?"},
      {"knob.json", tuned_json({{"omp_wait", "active"}}),
       "unknown knob 'omp_wait'; did you mean 'wait'?"},
      {"value.json", tuned_json({{"allocator", "tcmaloc"}}),
       "knob 'allocator': 'tcmaloc' is not one of glibc"},
      {"number.json", tuned_json({{"layout", 2}}),
       "knob 'layout': give the value as a string, \"2\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = file(c.name, c.text);
    RunResult r = run_bertfit(cmd + path);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("bertfit: error: --config " + path + ": " + c.message, 0), 0u) << r.err;
    EXPECT_EQ(r.out, "");
  }
  RunResult r = run_bertfit(cmd + (tmp_ / "none.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "bertfit: error: --config " + (tmp_ / "none.json") +
                       ": cannot open (No such file or directory)\n");
  // init's --config is a model's config.json, not a tuned.json.
  r = run_bertfit("init --config " + file("tuned.json", good) + " --output " + (tmp_ / "i"));
  EXPECT_EQ(r.err.find("bertfit_tune"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--config " + (tmp_ / "tuned.json") + ": "), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bertfit::testing
