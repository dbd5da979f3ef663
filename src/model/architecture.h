// What config.json's `architectures` says a checkpoint is, for one model family: the family's
// sequence classifier (the head bertfit runs), a model without a classification head (a base
// model, a pre-training or language-model checkpoint), or another task's head (token
// classification, question answering, ...). Inference refuses anything but the first; training
// starts a new head from any of them (model_io.h).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "model/head_kind.h"

namespace bertfit {

struct ModelFamily;

enum class ArchitectureKind {
  kSequenceClassifier,  // "BertForSequenceClassification": the family's model_class
  kTokenClassifier,     // "BertForTokenClassification"
  kNoHead,       // "BertModel", "BertForMaskedLM", "BertForPreTraining", "ElectraForPreTraining"
  kOtherHead,    // "BertForTokenClassification", "BertForQuestionAnswering", ...
  kOtherFamily,  // the name does not start with the family's class prefix
};

struct ArchitectureClass {
  ArchitectureKind kind;
  // What such a checkpoint is, for messages: "a token classifier (a label for every token)".
  std::string what;
};

// "Bert" for BertForSequenceClassification: the family's model_class before "For".
std::string class_prefix(const ModelFamily& family);

// Classifies a transformers class name whose family's class prefix is `prefix` ("Bert",
// "DistilBert", "XLMRoberta"): the rest "ForSequenceClassification" is the sequence classifier;
// "Model", "ForMaskedLM", "ForPreTraining", "ForCausalLM", "LMHeadModel" (and ELECTRA's
// "Discriminator" / "Generator") have no classification head; any other rest is another head.
ArchitectureClass classify_architecture(std::string_view prefix, std::string_view name);

// config.json's architectures[0] ("" when the key is absent, null or empty). Error naming
// `source` and the key for a value that is not a list of strings, or a class of another family.
std::string architecture_of(const nlohmann::json& hf_config, const ModelFamily& family,
                            const std::string& source);

// architecture_of's class when it is not `family`'s class for `head` (which config.h keeps as
// ModelConfig::other_architecture); "" when absent or that class.
std::string other_architecture(const nlohmann::json& hf_config, const ModelFamily& family,
                               HeadKind head, const std::string& source);

}  // namespace bertfit
