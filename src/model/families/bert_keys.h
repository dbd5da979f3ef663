// What the RoBERTa family shares with BERT, defined by bert.cc: BertConfig's keys (RobertaConfig,
// XLMRobertaConfig and CamembertConfig extend it) and BERT's encoder module names.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/family.h"

namespace bertfit {

struct ModelConfig;
class ConfigReader;

extern const ConfigKeyNames kBertKeyNames;
// BertConfig's keys (what `init --set` accepts), with `extra` after them.
std::vector<std::string> bert_config_keys(std::vector<std::string> extra = {});
// BERT's encoder layer modules under `prefix` ("bert.encoder.layer.").
LayerNames bert_layer_names(const char* prefix);

void bert_defaults(ModelConfig& c);
void read_bert_keys(const ConfigReader& r, ModelConfig& c);
void write_bert_keys(const ModelConfig& c, nlohmann::json& j);

}  // namespace bertfit
