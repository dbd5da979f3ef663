// The keys of transformers' BertConfig beyond the sizes, which the RoBERTa family's configs
// (RobertaConfig, XLMRobertaConfig, CamembertConfig) share: read and written by bert.cc.
#pragma once

#include <nlohmann/json_fwd.hpp>

namespace bertfit {

struct ModelConfig;
class ConfigReader;

void bert_defaults(ModelConfig& c);
void read_bert_keys(const ConfigReader& r, ModelConfig& c);
void write_bert_keys(const ModelConfig& c, nlohmann::json& j);

}  // namespace bertfit
