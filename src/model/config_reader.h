// Typed reads of a config.json object with the HF default when a key is absent, and errors that
// name the file and the key: what config.cc and the families' adapters (model/families/) read
// their keys with.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"

namespace bertfit {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, const std::string& source) : j_(j), source_(source) {}

  const std::string& source() const { return source_; }
  const nlohmann::json& json() const { return j_; }
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  int integer(const char* key, int min) const;
  int integer_or(const char* key, int fallback, int min) const;
  // A dropout probability in [0, 1); null counts as absent.
  double probability_or(const char* key, double fallback) const;
  double non_negative_or(const char* key, double fallback, bool strictly_positive) const;
  std::string string_or(const char* key, const std::string& fallback) const;
  bool bool_or(const char* key, bool fallback) const;
  // hidden_act's names (gelu, gelu_new, gelu_pytorch_tanh, relu).
  Activation activation_or(const char* key, Activation fallback) const;

 private:
  const nlohmann::json& j_;
  const std::string& source_;
};

}  // namespace bertfit
