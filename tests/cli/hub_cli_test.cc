// Hub names and checkpoint forms through the binary. A Hub emulator on 127.0.0.1
// (src/hub/testdata/hub_emulator.py) serves two commits of a model made by `bertfit init`; every
// command that takes --model gives with the repository id what it gives with the folder, at a
// branch or a commit (--revision), offline from the cache after a download; train saves the name
// as typed and resumes with it; errors name the flag. `bertfit download` prints the snapshot
// folder; `bertfit convert` turns a pytorch_model.bin folder (written by PyTorch,
// tests/fixtures/make_torch_checkpoints.py) into one that predicts the same, and refuses an
// occupied --output; `bertfit inspect` lists the tensors of every form.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hub/testdata/hub_emulator.h"
#include "io/safetensors.h"
#include "tests/util/torch_fixtures.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kMain(40, 'a');  // the commit of branch main: model a
const std::string kDev(40, 'd');   // the commit of branch dev: model b

std::string data_tsv() {
  return "text\tlabel\nthe film was great\t1\na dull and tired plot\t0\nhello world\t1\n"
         "not good at all\t0\nwonderful acting\t1\n";
}

int lines_of(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

class HubCli : public ::testing::Test {
 protected:
  void SetUp() override {
    init_tiny_model(tmp_ / "a", "distilbert", 2, 7);
    init_tiny_model(tmp_ / "b", "distilbert", 2, 8);
    write_text(tmp_ / "d.tsv", data_tsv());
    json repo;
    repo["refs"] = {{"main", kMain}, {"dev", kDev}};
    repo["commits"] = {{kMain, tmp_ / "a"}, {kDev, tmp_ / "b"}};
    json config;
    config["repos"]["org/tiny"] = repo;
    json roberta;
    roberta["refs"] = {{"main", kMain}};
    roberta["commits"] = {{kMain, shared_dir() + "/golden/roberta-tiny/model"}};
    config["repos"]["org/roberta"] = roberta;
    hub_.emplace(tmp_.path(), config);
    // The bertfit processes read these (hub_options_from_env); nothing of the user's own cache,
    // token or proxy settings reaches them.
    ::setenv("HF_ENDPOINT", hub_->endpoint().c_str(), 1);
    ::setenv("HF_HOME", (tmp_ / "hf_home").c_str(), 1);
    ::setenv("HF_HUB_CACHE", cache().c_str(), 1);
    ::setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1", 1);
    for (const char* name : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH",
                             "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}) {
      ::unsetenv(name);
    }
  }
  void TearDown() override { hub_.reset(); }

  std::string cache() const { return tmp_ / "cache"; }
  std::string snapshot(const std::string& commit) const {
    return cache() + "/models--org--tiny/snapshots/" + commit;
  }
  RunResult predict(const std::string& model_args) {
    return run_bertfit("predict " + model_args + " --input " + (tmp_ / "d.tsv") +
                       " --text-a-column text");
  }
  RunResult offline(const std::string& args) {
    ::setenv("HF_HUB_OFFLINE", "1", 1);
    RunResult r = run_bertfit(args);
    ::unsetenv("HF_HUB_OFFLINE");
    return r;
  }

  TempDir tmp_;
  std::optional<HubEmulator> hub_;
};

TEST_F(HubCli, DownloadPrintsTheSnapshotFolder) {
  RunResult r = run_bertfit("download org/tiny");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, snapshot(kMain) + "\n");
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"}) {
    EXPECT_EQ(read_text(snapshot(kMain) + "/" + f), read_text(tmp_ / (std::string("a/") + f))) << f;
  }
  r = run_bertfit("download org/tiny --revision dev");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, snapshot(kDev) + "\n");
  // The Hub library's one-line errors.
  r = run_bertfit("download org/absent");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "bertfit: error: repository 'org/absent' not found at " + hub_->endpoint() +
                       " (HTTP 404); check the name, or set HF_TOKEN if it is private\n");
  r = run_bertfit("download org/tiny --revision v9");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "bertfit: error: revision 'v9' not found in 'org/tiny' at " + hub_->endpoint() +
                       " (HTTP 404): give a branch, a tag or a commit hash\n");
  r = run_bertfit("download ../etc");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "bertfit: error: '../etc' is not a Hub repository id (name or org/name)\n");
}

// A RoBERTa repository brings its byte-level BPE files (vocab.json, merges.txt), and commands
// take it by name.
TEST_F(HubCli, DownloadBringsEveryTokenizerFile) {
  RunResult r = run_bertfit("download org/roberta");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string folder = cache() + "/models--org--roberta/snapshots/" + kMain;
  EXPECT_EQ(r.out, folder + "\n");
  const std::string src = shared_dir() + "/golden/roberta-tiny/model";
  for (const char* f :
       {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"}) {
    EXPECT_EQ(read_text(folder + "/" + f), read_text(src + "/" + f)) << f;
  }
  RunResult hub = predict("--model org/roberta --max-seq-len 64");
  ASSERT_EQ(hub.exit_code, 0) << hub.err;
  RunResult local = predict("--model " + src + " --max-seq-len 64");
  ASSERT_EQ(local.exit_code, 0) << local.err;
  EXPECT_EQ(hub.out, local.out);
}

TEST_F(HubCli, EveryCommandWithModelTakesAHubName) {
  const RunResult local = predict("--model " + (tmp_ / "a"));
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const RunResult hub = predict("--model org/tiny");
  ASSERT_EQ(hub.exit_code, 0) << hub.err;
  EXPECT_EQ(hub.out, local.out);
  EXPECT_EQ(lines_of(hub.out), 5);

  const std::string eval_args =
      " --dev-file " + (tmp_ / "d.tsv") + " --text-a-column text --label-column label";
  const std::string tokenize_args = " --input " + (tmp_ / "d.tsv") + " --text-a-column text";
  write_text(tmp_ / "batch.json", R"({"input_ids": [[101, 7592, 2088, 102]], "labels": [1]})");
  const std::string forward_args = " --batch " + (tmp_ / "batch.json");
  for (const auto& [command, args] : std::vector<std::pair<std::string, std::string>>{
           {"eval", eval_args}, {"tokenize", tokenize_args}, {"forward", forward_args}}) {
    const RunResult want = run_bertfit(command + " --model " + (tmp_ / "a") + args);
    ASSERT_EQ(want.exit_code, 0) << command << ": " << want.err;
    const RunResult got = run_bertfit(command + " --model org/tiny" + args);
    ASSERT_EQ(got.exit_code, 0) << command << ": " << got.err;
    EXPECT_EQ(got.out, want.out) << command;
  }
  const RunResult bench =
      run_bertfit("bench infer --model org/tiny --batch-size 2 --seq-len 16 --steps 1 --warmup 0");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_EQ(json::parse(bench.out)["arch"], "distilbert");
}

TEST_F(HubCli, RevisionByBranchAndByCommit) {
  const RunResult a = predict("--model " + (tmp_ / "a"));
  const RunResult b = predict("--model " + (tmp_ / "b"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_NE(a.out, b.out);  // two different models
  RunResult r = predict("--model org/tiny --revision dev");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, b.out);
  r = predict("--model org/tiny --revision " + kMain);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, a.out);
  r = predict("--model org/tiny --revision " + kDev);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, b.out);
  // A revision belongs to a repository id, not to a folder.
  r = predict("--model " + (tmp_ / "a") + " --revision dev");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "bertfit: error: --revision dev is for a Hub repository id, but --model " +
                       (tmp_ / "a") + " is a folder here\n");
}

TEST_F(HubCli, OfflineAfterADownloadAsksTheHubNothing) {
  const RunResult online = predict("--model org/tiny");
  ASSERT_EQ(online.exit_code, 0) << online.err;
  hub_->clear_log();
  RunResult r =
      offline("predict --model org/tiny --input " + (tmp_ / "d.tsv") + " --text-a-column text");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, online.out);
  r = offline("inspect org/tiny");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(hub_->requests().empty());
  // A revision never downloaded: the offline message, behind the flag.
  r = offline("predict --model org/tiny --revision dev --input " + (tmp_ / "d.tsv") +
              " --text-a-column text");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "bertfit: error: --model org/tiny (not a folder here, so a Hub repository id): offline "
            "mode (HF_HUB_OFFLINE) and the cache " +
                cache() +
                " has no config.json of 'org/tiny' at revision 'dev'; run once with network "
                "access to download it\n");
  EXPECT_TRUE(hub_->requests().empty());
}

TEST_F(HubCli, ErrorsNameTheFlag) {
  RunResult r = predict("--model org/absent");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "bertfit: error: --model org/absent (not a folder here, so a Hub repository id): "
            "repository 'org/absent' not found at " +
                hub_->endpoint() +
                " (HTTP 404); check the name, or set HF_TOKEN if it is private\n");
  EXPECT_EQ(r.out, "");
  const std::string missing = tmp_ / "no/such/model";
  r = predict("--model " + missing);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "bertfit: error: --model " + missing +
                       ": no such folder, and not a Hugging Face Hub repository id (name or "
                       "org/name)\n");
  r = predict("--model " + (tmp_ / "a/config.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--model " + (tmp_ / "a/config.json") + " is a file"), std::string::npos)
      << r.err;
  r = run_bertfit("inspect org/absent");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("model org/absent (not a folder here, so a Hub repository id): repository "
                       "'org/absent' not found"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(lines_of(r.err), 1) << r.err;
}

TEST_F(HubCli, InspectListsTheTensorsOfAHubModel) {
  RunResult r = run_bertfit("inspect org/tiny --revision dev");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(
      r.out.find("model:         org/tiny (revision dev)\nmodel folder:  " + snapshot(kDev) + "\n"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(snapshot(kDev) + "/model.safetensors: 40 tensors (metadata: format=pt)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("distilbert.embeddings.word_embeddings.weight"), std::string::npos);
  EXPECT_NE(r.out.find("check:         the tensors fit the config\n"), std::string::npos) << r.out;
}

// train saves --model as typed and loads the snapshot: the same run as from the folder; its
// resume takes the same name (and refuses another revision or the snapshot folder's path).
TEST_F(HubCli, TrainFromAHubNameAndResume) {
  const std::string common = " --train-file " + (tmp_ / "d.tsv") +
                             " --text-a-column text --label-column label --max-steps 1 "
                             "--batch-size 2 --lr 1e-3 --eval-every never --threads 2";
  RunResult r = run_bertfit("train --model org/tiny --output " + (tmp_ / "out") + common);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json state = json::parse(read_text(tmp_ / "out/checkpoint/trainer_state.json"));
  EXPECT_EQ(state["options"]["model"], "org/tiny");
  EXPECT_EQ(state["options"]["revision"], "main");
  EXPECT_EQ(read_text(tmp_ / "out/vocab.txt"), read_text(tmp_ / "a/vocab.txt"));
  r = run_bertfit("train --model " + (tmp_ / "a") + " --output " + (tmp_ / "local") + common);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(all_params(tmp_ / "out/model.safetensors"),
            all_params(tmp_ / "local/model.safetensors"));

  const std::string resume = " --output " + (tmp_ / "out") + common + " --resume " + (tmp_ / "out");
  r = run_bertfit("train --model org/tiny" + resume);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["already_finished"], true) << r.out;
  r = run_bertfit("train --model org/tiny --revision dev" + resume);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--revision is \"dev\" but the checkpoint has \"main\""), std::string::npos)
      << r.err;
  r = run_bertfit("train --model " + snapshot(kMain) + resume);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(
      r.err.find("--model is \"" + snapshot(kMain) + "\" but the checkpoint has \"org/tiny\""),
      std::string::npos)
      << r.err;
}

TEST_F(HubCli, ConvertRefusesAnOccupiedOutput) {
  RunResult r = run_bertfit("convert org/tiny --output " + (tmp_ / "c"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(predict("--model " + (tmp_ / "c")).out, predict("--model " + (tmp_ / "a")).out);
  r = run_bertfit("convert " + (tmp_ / "b") + " --output " + (tmp_ / "c"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "bertfit: error: --output " + (tmp_ / "c") +
                       " already holds a model, checkpoint or metrics; choose another folder, or "
                       "pass --overwrite-output-dir to replace it\n");
  EXPECT_EQ(read_text(tmp_ / "c/model.safetensors"), read_text(tmp_ / "a/model.safetensors"));
  r = run_bertfit("convert " + (tmp_ / "b") + " --output " + (tmp_ / "c") +
                  " --overwrite-output-dir");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_text(tmp_ / "c/model.safetensors"), read_text(tmp_ / "b/model.safetensors"));
  EXPECT_FALSE(fs::exists(tmp_ / "c.partial"));
  EXPECT_FALSE(fs::exists(tmp_ / "c.old"));
  r = run_bertfit("convert " + (tmp_ / "b") + " --output " + (tmp_ / "b"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is the input model"), std::string::npos) << r.err;
}

// A model folder with pytorch_model.bin (one file, then three shards), written by PyTorch from
// model a's tensors: inspect lists them, convert writes model.safetensors, and the converted
// folder predicts exactly what model a does (fp32 all the way: no rounding anywhere).
TEST_F(HubCli, ConvertPytorchCheckpointsPredictsTheSame) {
  if (python_with_torch().empty()) GTEST_SKIP() << kNoTorch;
  const RunResult want = predict("--model " + (tmp_ / "a"));
  ASSERT_EQ(want.exit_code, 0) << want.err;
  for (int shards : {1, 3}) {
    const std::string pt = tmp_ / ("pt" + std::to_string(shards));
    const std::string out = tmp_ / ("converted" + std::to_string(shards));
    fs::create_directories(pt);
    for (const char* f :
         {"config.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"}) {
      fs::copy_file(tmp_ / (std::string("a/") + f), pt + "/" + f);
    }
    ASSERT_TRUE(make_torch_checkpoints("model " + (tmp_ / "a/model.safetensors") + " f32 " +
                                       std::to_string(shards) + " " + pt));
    RunResult r = run_bertfit("inspect " + pt);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // 40 tensors and DistilBERT's tied vocab_projector.weight, which the classifier ignores.
    if (shards == 1) {
      EXPECT_NE(r.out.find(pt + "/pytorch_model.bin: 41 tensors\n"), std::string::npos) << r.out;
    } else {
      EXPECT_NE(r.out.find(pt + "/pytorch_model.bin.index.json: 41 tensors\nshards:        3\n"),
                std::string::npos)
          << r.out;
      EXPECT_NE(r.out.find(pt + "/pytorch_model-00003-of-00003.bin"), std::string::npos);
    }
    EXPECT_NE(r.out.find("unused by the classifier, ignored on load: vocab_projector.weight"),
              std::string::npos)
        << r.out;
    r = run_bertfit("convert " + pt + " --output " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("converted " + pt + "/pytorch_model.bin"), std::string::npos) << r.out;
    for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
                          "special_tokens_map.json"}) {
      EXPECT_TRUE(fs::exists(out + "/" + f)) << f;
    }
    EXPECT_FALSE(fs::exists(out + "/pytorch_model.bin"));
    // The same tensors as a's file, in the same order, in fp32.
    EXPECT_EQ(all_params(out + "/model.safetensors"), all_params(tmp_ / "a/model.safetensors"));
    r = predict("--model " + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want.out) << shards << " shard(s)";
  }
}

}  // namespace
}  // namespace bertfit::testing
