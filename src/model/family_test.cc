// The family registry (model/family.h): each family round-trips its config through config.json,
// declares the keys it writes, is found by its model_type; an unknown model_type names the
// supported and the planned ones; and no code outside the adapters asks which family it runs
// (the seam is kept: a grep of the source tree).
#include "model/family.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace bertfit {
namespace {

TEST(ModelFamily, EachRoundTripsItsConfigAndDeclaresItsKeys) {
  ASSERT_FALSE(model_families().empty());
  for (const ModelFamily* f : model_families()) {
    EXPECT_EQ(&model_family(f->model_type), f);
    const ModelConfig c = ModelConfig::defaults(*f);
    EXPECT_EQ(c.family, f);
    const std::string text = model_config_to_json(c);
    EXPECT_EQ(parse_model_config(text, "config.json"), c) << f->model_type;
    // Every key written (but the label and bookkeeping keys) is one `init --set` accepts.
    const nlohmann::json j = nlohmann::json::parse(text);
    for (const auto& [key, value] : j.items()) {
      if (key == "architectures" || key == "model_type" || key == "id2label" || key == "label2id" ||
          key == "transformers_version") {
        continue;
      }
      EXPECT_NE(std::find(f->config_keys.begin(), f->config_keys.end(), key), f->config_keys.end())
          << f->model_type << " writes '" << key << "' but does not declare it";
    }
    EXPECT_EQ(j["architectures"][0], f->model_class);
    // Every tensor name starts with the base prefix, but the head's that transformers keeps
    // outside the base model.
    const ParamLayout layout(c);
    for (const ParamEntry& e : layout.entries()) {
      if (e.layer == c.layers) continue;
      EXPECT_EQ(e.name.rfind(f->base_prefix, 0), 0u) << e.name;
    }
  }
}

TEST(ModelFamily, UnknownTypesNameTheSupportedAndPlannedOnes) {
  try {
    model_family("deberta-v2");
    FAIL() << "deberta-v2 is not supported yet";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unsupported model_type 'deberta-v2'"), std::string::npos) << m;
    EXPECT_NE(m.find(model_type_list()), std::string::npos) << m;
    EXPECT_NE(m.find("planned: "), std::string::npos) << m;
  }
  EXPECT_EQ(model_type_list(), "distilbert, bert, roberta, xlm-roberta, camembert, electra");
}

// Outside the adapters (src/model/families/, family.cc) and tests, no source names a family to
// branch on it: a family's differences are declared, not tested for. The one exception is the
// tokenizer loader, which maps a folder without tokenizer_class to its tokenizer by config.json's
// model_type, as transformers' AutoTokenizer does (the tokenizer library knows no families).
TEST(ModelFamily, NoCodeOutsideTheAdaptersAsksWhichFamilyItRuns) {
  namespace fs = std::filesystem;
  const fs::path root = BERTFIT_SOURCE_DIR;
  // Searched in each line with its whitespace removed. (Plain substrings: GCC 12's std::regex
  // trips -Wmaybe-uninitialized under the sanitizers.)
  std::vector<std::string> asks = {"model_type()==", "model_type()!=",  "model_type==",
                                   "model_type!=",   "model_family(\"", "Arch::"};
  for (const ModelFamily* f : model_families()) {
    const std::string quoted = std::string("\"") + f->model_type + "\"";
    for (const char* op : {"==", "!="}) {
      asks.push_back(op + quoted);
      asks.push_back(quoted + op);
    }
  }
  int files = 0;
  for (const char* dir : {"src", "apps", "bench"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      const fs::path& p = entry.path();
      if (!entry.is_regular_file() || (p.extension() != ".cc" && p.extension() != ".h")) continue;
      const std::string rel = fs::relative(p, root).string();
      if (rel.find("_test.cc") != std::string::npos || rel.rfind("src/model/families/", 0) == 0 ||
          rel == "src/model/family.cc" || rel == "src/model/test_config.h" ||
          rel == "src/tokenizer/load.cc") {
        continue;
      }
      ++files;
      std::ifstream in(p);
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::string packed;
        for (char ch : line) {
          if (ch != ' ' && ch != '\t') packed += ch;
        }
        for (const std::string& a : asks) {
          EXPECT_EQ(packed.find(a), std::string::npos) << rel << ":" << n << ": " << line;
        }
      }
    }
  }
  EXPECT_GT(files, 100);
}

}  // namespace
}  // namespace bertfit
