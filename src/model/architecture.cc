// Classifying config.json's `architectures` entry (see architecture.h).
#include "model/architecture.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/family.h"

namespace bertfit {
namespace {

struct KnownClass {
  const char* rest;  // the class name after the family's prefix
  ArchitectureKind kind;
  const char* what;
};

// transformers' classes of the BERT-like families, by what follows the family's prefix.
constexpr KnownClass kKnownClasses[] = {
    {"ForSequenceClassification", ArchitectureKind::kSequenceClassifier,
     "a sequence classifier (labels for the whole input)"},
    {"Model", ArchitectureKind::kNoHead, "a base model (the encoder alone, no head)"},
    {"ForMaskedLM", ArchitectureKind::kNoHead,
     "a masked-language model (a pre-trained encoder, no classification head)"},
    {"ForPreTraining", ArchitectureKind::kNoHead,
     "a pre-training checkpoint (a pre-trained encoder, no classification head)"},
    {"ForCausalLM", ArchitectureKind::kNoHead, "a language model (no classification head)"},
    {"LMHeadModel", ArchitectureKind::kNoHead, "a language model (no classification head)"},
    {"Discriminator", ArchitectureKind::kNoHead,
     "a pre-training discriminator (no classification head)"},
    {"Generator", ArchitectureKind::kNoHead, "a pre-training generator (no classification head)"},
    {"ForTokenClassification", ArchitectureKind::kTokenClassifier,
     "a token classifier (a label for every token)"},
    {"ForQuestionAnswering", ArchitectureKind::kOtherHead,
     "an extractive question-answering model (answer-span start and end logits)"},
    {"ForMultipleChoice", ArchitectureKind::kOtherHead,
     "a multiple-choice model (one score per choice)"},
    {"ForNextSentencePrediction", ArchitectureKind::kOtherHead,
     "a next-sentence predictor (its pre-training head)"},
};

}  // namespace

std::string class_prefix(const ModelFamily& family) {
  const std::string model_class = family.model_class;
  return model_class.substr(0, model_class.find("For"));
}

ArchitectureClass classify_architecture(std::string_view prefix, std::string_view name) {
  if (name.substr(0, prefix.size()) != prefix || name.size() == prefix.size()) {
    return {ArchitectureKind::kOtherFamily, "a model of another family"};
  }
  const std::string_view rest = name.substr(prefix.size());
  for (const KnownClass& c : kKnownClasses) {
    if (rest == c.rest) return {c.kind, c.what};
  }
  return {ArchitectureKind::kOtherHead, "a model with another task's head"};
}

std::string architecture_of(const nlohmann::json& hf, const ModelFamily& family,
                            const std::string& source) {
  if (!hf.is_object() || !hf.contains("architectures") || hf["architectures"].is_null()) return "";
  const nlohmann::json& list = hf["architectures"];
  if (!list.is_array()) {
    throw_error(source, ": key 'architectures' must be a list of class names, found ", list.dump());
  }
  if (list.empty()) return "";
  if (!list[0].is_string()) {
    throw_error(source, ": key 'architectures' must hold class names (strings), found ",
                list[0].dump());
  }
  const std::string name = list[0].get<std::string>();
  const std::string prefix = class_prefix(family);
  const ArchitectureClass c = classify_architecture(prefix, name);
  if (c.kind == ArchitectureKind::kOtherFamily) {
    throw_error(source, ": key 'architectures' names ", name, ", which is not a ", prefix,
                "* class, but 'model_type' is ", family.model_type, " (", family.model_class,
                "); the two must describe the same model");
  }
  return name;
}

std::string other_architecture(const nlohmann::json& hf, const ModelFamily& family, HeadKind head,
                               const std::string& source) {
  const std::string name = architecture_of(hf, family, source);
  return name == family.class_for(head) ? "" : name;
}

}  // namespace bertfit
