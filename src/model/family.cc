// The registry of model families (see family.h): one line per adapter in model/families/.
#include "model/family.h"

#include "base/check.h"
#include "base/error.h"
#include "model/config.h"

namespace bertfit {

// Defined by the adapters in model/families/.
const ModelFamily& distilbert_family();
const ModelFamily& bert_family();
const ModelFamily& roberta_family();
const ModelFamily& xlm_roberta_family();
const ModelFamily& camembert_family();
const ModelFamily& electra_family();
const ModelFamily& deberta_v2_family();
const ModelFamily& modernbert_family();

const std::vector<const ModelFamily*>& model_families() {
  static const std::vector<const ModelFamily*> families = {
      &distilbert_family(), &bert_family(),    &roberta_family(),    &xlm_roberta_family(),
      &camembert_family(),  &electra_family(), &deberta_v2_family(), &modernbert_family()};
  return families;
}

const ModelFamily& default_family() { return distilbert_family(); }

const char* head_kind_name(HeadKind kind) {
  switch (kind) {
    case HeadKind::kSequenceClassification:
      return "sequence classification";
    case HeadKind::kTokenClassification:
      return "token classification";
    case HeadKind::kEmbedding:
      return "sentence embedding";
  }
  CHECK(false, "head kind ", static_cast<int>(kind));
  return "";
}

const char* head_kind_noun(HeadKind kind) {
  switch (kind) {
    case HeadKind::kSequenceClassification:
      return "sequence classifier";
    case HeadKind::kTokenClassification:
      return "token classifier";
    case HeadKind::kEmbedding:
      return "sentence embedder";
  }
  CHECK(false, "head kind ", static_cast<int>(kind));
  return "";
}

std::string ModelFamily::class_for(HeadKind head) const {
  const std::string c = model_class;
  const std::string prefix = c.substr(0, c.find("For"));
  switch (head) {
    case HeadKind::kSequenceClassification:
      return c;
    case HeadKind::kTokenClassification:
      return prefix + "ForTokenClassification";
    case HeadKind::kEmbedding:
      return prefix + "Model";  // sentence-transformers saves the base model
  }
  CHECK(false, "head kind ", static_cast<int>(head));
  return c;
}

std::string model_type_list() {
  std::string out;
  for (const ModelFamily* f : model_families()) out += cat(out.empty() ? "" : ", ", f->model_type);
  return out;
}

const ModelFamily& model_family(std::string_view model_type) {
  for (const ModelFamily* f : model_families()) {
    if (model_type == f->model_type) return *f;
  }
  throw_error("unsupported model_type '", model_type, "' (bertfit supports ", model_type_list(),
              ")");
}

}  // namespace bertfit
