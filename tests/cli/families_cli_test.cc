// Model families through the binary (issue 32): `inspect` names a RoBERTa-family model's
// type and class, `convert` writes a folder that carries its tokenizer files unchanged and loads
// to the same logits, `init` refuses to pair a RoBERTa-family model with a WordPiece vocabulary,
// and an unsupported model_type names the supported and the planned ones.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;

std::string golden(const std::string& model) { return shared_dir() + "/golden/" + model; }

TEST(FamiliesCli, InspectNamesTheFamily) {
  for (auto [model, type, cls] :
       {std::tuple{"roberta-tiny", "roberta", "RobertaForSequenceClassification"},
        std::tuple{"xlmr-tiny", "xlm-roberta", "XLMRobertaForSequenceClassification"}}) {
    RunResult r = run_bertfit("inspect " + golden(model) + "/model");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string("arch:          ") + type + " (" + cls + ")"),
              std::string::npos)
        << r.out;
  }
}

TEST(FamiliesCli, ConvertCarriesTheTokenizerFilesAndKeepsTheLogits) {
  TempDir tmp;
  for (const std::string model : {"roberta-tiny", "xlmr-tiny"}) {
    const std::string src = golden(model) + "/model", out = tmp / model;
    RunResult c = run_bertfit("convert " + src + " --output " + out);
    ASSERT_EQ(c.exit_code, 0) << c.err;
    for (const auto& entry : fs::directory_iterator(src)) {
      const std::string name = entry.path().filename().string();
      if (name == "config.json" || name == "model.safetensors") continue;
      EXPECT_EQ(read_text(out + "/" + name), read_text(src + "/" + name)) << model << " " << name;
    }
    EXPECT_EQ(tensors_of(out + "/model.safetensors"), tensors_of(src + "/model.safetensors"));
    const std::string batch = golden(model) + "/batch.json";
    RunResult a = run_bertfit("forward --model " + src + " --batch " + batch);
    RunResult b = run_bertfit("forward --model " + out + " --batch " + batch);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(nlohmann::json::parse(a.out)["logits"], nlohmann::json::parse(b.out)["logits"]);
  }
}

TEST(FamiliesCli, RobertaWithAWordPieceVocabularyIsRefused) {
  TempDir tmp;
  RunResult r = run_bertfit("init --arch roberta --output " + (tmp / "m") + " --vocab " +
                            shared_dir() + "/data/vocab/bert-base-uncased.txt");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("a roberta model carries its tokenizer's files"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(tmp / "m/config.json"));
}

TEST(FamiliesCli, UnsupportedTypesNameWhatIsSupported) {
  TempDir tmp;
  write_text(tmp / "config.json", R"({"model_type": "deberta-v2", "vocab_size": 10})");
  RunResult r = run_bertfit("inspect " + std::string(tmp.path()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unsupported model_type 'deberta-v2' (bertfit supports distilbert, bert, "
                       "roberta, xlm-roberta, camembert; planned: electra"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace bertfit::testing
