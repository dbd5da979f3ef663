// The family registry (model/family.h): each family round-trips its config through config.json,
// declares the keys it writes, is found by its model_type; an unknown model_type names the
// supported and the planned ones; no code outside the adapters asks which family it runs, and
// none but the code that chooses or routes by a head asks which head a model has (the seams are
// kept: greps of the source tree).
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

TEST(ModelFamily, UnknownTypesNameTheSupportedOnes) {
  try {
    model_family("mpnet");
    FAIL() << "mpnet is not supported";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unsupported model_type 'mpnet'"), std::string::npos) << m;
    EXPECT_NE(m.find(model_type_list()), std::string::npos) << m;
  }
  EXPECT_EQ(model_type_list(),
            "distilbert, bert, roberta, xlm-roberta, camembert, electra, deberta-v2, modernbert");
}

// Calls fn(path relative to the source root, line number, line, the line without whitespace)
// for every line of the .cc and .h files under src/, apps/ and bench/ but the tests; returns the
// number of files. (Plain substrings, no std::regex: GCC 12's trips -Wmaybe-uninitialized under
// the sanitizers.)
template <class Fn>
int for_each_source_line(Fn fn) {
  namespace fs = std::filesystem;
  const fs::path root = BERTFIT_SOURCE_DIR;
  int files = 0;
  for (const char* dir : {"src", "apps", "bench"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      const fs::path& p = entry.path();
      if (!entry.is_regular_file() || (p.extension() != ".cc" && p.extension() != ".h")) continue;
      const std::string rel = fs::relative(p, root).string();
      if (rel.find("_test.cc") != std::string::npos) continue;
      ++files;
      std::ifstream in(p);
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::string packed;
        for (char ch : line) {
          if (ch != ' ' && ch != '\t') packed += ch;
        }
        fn(rel, n, line, packed);
      }
    }
  }
  return files;
}

// Outside the adapters (src/model/families/, family.cc) and tests, no source names a family to
// branch on it: a family's differences are declared, not tested for. The one exception is the
// tokenizer loader, which maps a folder without tokenizer_class to its tokenizer by config.json's
// model_type, as transformers' AutoTokenizer does (the tokenizer library knows no families).
TEST(ModelFamily, NoCodeOutsideTheAdaptersAsksWhichFamilyItRuns) {
  std::vector<std::string> asks = {"model_type()==", "model_type()!=",  "model_type==",
                                   "model_type!=",   "model_family(\"", "Arch::"};
  for (const ModelFamily* f : model_families()) {
    const std::string quoted = std::string("\"") + f->model_type + "\"";
    for (const char* op : {"==", "!="}) {
      asks.push_back(op + quoted);
      asks.push_back(quoted + op);
    }
  }
  const int files = for_each_source_line(
      [&](const std::string& rel, int n, const std::string& line, const std::string& packed) {
        if (rel.rfind("src/model/families/", 0) == 0 || rel == "src/model/family.cc" ||
            rel == "src/model/test_config.h" || rel == "src/tokenizer/load.cc") {
          return;
        }
        for (const std::string& a : asks) {
          EXPECT_EQ(packed.find(a), std::string::npos) << rel << ":" << n << ": " << line;
        }
      });
  EXPECT_GT(files, 100);
}

// What a head computes and how its outputs and labels are shaped is the Head's (model/head.h):
// its loss, whether its outputs are per token, its label count, its output weight. A model's
// head kind is compared only where a head is chosen or a command's data and output are routed by
// it; a task's kind (TaskInfo::head, decided by the data) may be compared anywhere.
TEST(Head, OnlyTheCodeThatChoosesOrRoutesByAHeadAsksWhichKindItIs) {
  const std::vector<std::string> deciders = {
      "src/model/family.cc",          // the kind's transformers class
      "src/model/config.h",           // a token head's problem type: single-label
      "src/model/head.cc",            // model_head: the Head of a config
      "src/task/dataset.cc",          // the task a model's head implies
      "apps/bertfit/cmd_eval.cc",     // the data must suit the model's head
      "apps/bertfit/cmd_predict.cc",  // tags or labels out
      "apps/bertfit/cmd_embed.cc",    // embeddings out
      "src/serve/service.cc"};        // entities or label scores answered
  const int files = for_each_source_line(
      [&](const std::string& rel, int n, const std::string& line, const std::string& packed) {
        if (std::find(deciders.begin(), deciders.end(), rel) != deciders.end()) return;
        // The double-precision reference model keeps its own copy of every formula, heads
        // included: sharing the seam would let one mistake pass in both.
        if (rel.starts_with("src/model/ref/")) return;
        for (const char* a : {"==HeadKind::", "!=HeadKind::"}) {
          const std::size_t at = packed.find(a);
          if (at == std::string::npos || packed.substr(0, at).ends_with("task.head")) continue;
          ADD_FAILURE() << rel << ":" << n << ": " << line;
        }
      });
  EXPECT_GT(files, 100);
}

}  // namespace
}  // namespace bertfit
