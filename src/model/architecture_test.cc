// config.json's architectures classified per family (model/architecture.h): the family's
// sequence classifier, classes without a classification head, other tasks' heads, and another
// family's class, which parsing refuses naming the file and the key.
#include "model/architecture.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "model/config.h"
#include "model/family.h"

namespace bertfit {
namespace {

using nlohmann::json;

ArchitectureKind kind(std::string_view prefix, std::string_view name) {
  return classify_architecture(prefix, name).kind;
}

TEST(Architecture, ClassPrefixes) {
  EXPECT_EQ(class_prefix(model_family("bert")), "Bert");
  EXPECT_EQ(class_prefix(model_family("distilbert")), "DistilBert");
  EXPECT_EQ(class_prefix(model_family("roberta")), "Roberta");
  EXPECT_EQ(class_prefix(model_family("xlm-roberta")), "XLMRoberta");
  EXPECT_EQ(class_prefix(model_family("camembert")), "Camembert");
}

TEST(Architecture, SequenceClassifiers) {
  for (const ModelFamily* f : model_families()) {
    EXPECT_EQ(kind(class_prefix(*f), f->model_class), ArchitectureKind::kSequenceClassifier)
        << f->model_class;
    const std::string token = f->class_for(HeadKind::kTokenClassification);
    EXPECT_EQ(kind(class_prefix(*f), token), ArchitectureKind::kTokenClassifier) << token;
  }
  EXPECT_EQ(model_family("xlm-roberta").class_for(HeadKind::kTokenClassification),
            "XLMRobertaForTokenClassification");
}

TEST(Architecture, ClassesWithoutAClassificationHead) {
  for (const char* name : {"BertModel", "BertForMaskedLM", "BertForPreTraining", "BertLMHeadModel",
                           "BertForCausalLM"}) {
    EXPECT_EQ(kind("Bert", name), ArchitectureKind::kNoHead) << name;
  }
  EXPECT_EQ(kind("DistilBert", "DistilBertModel"), ArchitectureKind::kNoHead);
  EXPECT_EQ(kind("Roberta", "RobertaModel"), ArchitectureKind::kNoHead);
  EXPECT_EQ(kind("XLMRoberta", "XLMRobertaForMaskedLM"), ArchitectureKind::kNoHead);
  EXPECT_EQ(kind("Electra", "ElectraModel"), ArchitectureKind::kNoHead);
  EXPECT_EQ(kind("Electra", "ElectraForPreTraining"), ArchitectureKind::kNoHead);
  EXPECT_EQ(kind("Electra", "ElectraDiscriminator"), ArchitectureKind::kNoHead);
  EXPECT_NE(classify_architecture("Bert", "BertModel").what.find("base model"), std::string::npos);
}

TEST(Architecture, OtherTasksHeads) {
  for (const char* name : {"BertForQuestionAnswering", "BertForMultipleChoice",
                           "BertForNextSentencePrediction", "BertForSomethingNew"}) {
    EXPECT_EQ(kind("Bert", name), ArchitectureKind::kOtherHead) << name;
  }
  EXPECT_NE(classify_architecture("Bert", "BertForTokenClassification").what.find("every token"),
            std::string::npos);
}

TEST(Architecture, AnotherFamilysClass) {
  EXPECT_EQ(kind("Bert", "RobertaForSequenceClassification"), ArchitectureKind::kOtherFamily);
  EXPECT_EQ(kind("Bert", "DistilBertForSequenceClassification"), ArchitectureKind::kOtherFamily);
  EXPECT_EQ(kind("DistilBert", "BertForSequenceClassification"), ArchitectureKind::kOtherFamily);
  EXPECT_EQ(kind("Roberta", "XLMRobertaModel"), ArchitectureKind::kOtherFamily);
  EXPECT_EQ(kind("Bert", "Bert"), ArchitectureKind::kOtherFamily);
  EXPECT_EQ(kind("Bert", ""), ArchitectureKind::kOtherFamily);
}

std::string error_of(const json& j) {
  try {
    parse_model_config_json(j, "m/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A tiny BERT config.json with `architectures` set to the given value.
json tiny_bert(const json& architectures) {
  return {{"model_type", "bert"},          {"vocab_size", 100},        {"hidden_size", 8},
          {"num_hidden_layers", 1},        {"num_attention_heads", 2}, {"intermediate_size", 16},
          {"architectures", architectures}};
}

std::string other_of(const json& architectures) {
  return parse_model_config_json(tiny_bert(architectures), "c").other_architecture;
}

TEST(Architecture, ConfigKeepsOnlyAnotherClass) {
  json absent = tiny_bert(nullptr);
  absent.erase("architectures");
  EXPECT_EQ(parse_model_config_json(absent, "c").other_architecture, "");
  EXPECT_EQ(other_of(nullptr), "");
  EXPECT_EQ(other_of(json::array()), "");
  EXPECT_EQ(other_of(json::array({"BertForSequenceClassification"})), "");
  EXPECT_EQ(other_of(json::array({"BertForQuestionAnswering"})), "BertForQuestionAnswering");
  EXPECT_EQ(other_of(json::array({"BertModel", "BertForMaskedLM"})), "BertModel");
  // Saved configs name the family's sequence classifier.
  ModelConfig c = parse_model_config_json(tiny_bert(json::array({"BertForMaskedLM"})), "c");
  EXPECT_EQ(c.head, HeadKind::kSequenceClassification);
  const json saved = json::parse(model_config_to_json(c));
  EXPECT_EQ(saved["architectures"], json::array({"BertForSequenceClassification"}));
  EXPECT_EQ(parse_model_config_json(saved, "saved").other_architecture, "");
}

// The token classifier's class gives the config a token head, which a saved config names.
TEST(Architecture, TokenClassifierClassGivesATokenHead) {
  ModelConfig c =
      parse_model_config_json(tiny_bert(json::array({"BertForTokenClassification"})), "c");
  EXPECT_EQ(c.head, HeadKind::kTokenClassification);
  EXPECT_EQ(c.other_architecture, "");
  const json saved = json::parse(model_config_to_json(c));
  EXPECT_EQ(saved["architectures"], json::array({"BertForTokenClassification"}));
  EXPECT_EQ(parse_model_config_json(saved, "saved"), c);
  // Relative to a sequence head, the token classifier is another class.
  EXPECT_EQ(other_architecture(tiny_bert(json::array({"BertForTokenClassification"})),
                               model_family("bert"), HeadKind::kSequenceClassification, "c"),
            "BertForTokenClassification");
}

TEST(Architecture, InconsistentOrMalformedEntriesAreErrorsNamingFileAndKey) {
  std::string e = error_of(tiny_bert(json::array({"RobertaForSequenceClassification"})));
  EXPECT_NE(e.find("m/config.json: key 'architectures' names RobertaForSequenceClassification"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("model_type' is bert"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  e = error_of(tiny_bert("BertModel"));
  EXPECT_NE(e.find("m/config.json: key 'architectures' must be a list"), std::string::npos) << e;
  e = error_of(tiny_bert(json::array({42})));
  EXPECT_NE(e.find("m/config.json: key 'architectures' must hold class names"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace bertfit
