// What the tune CLI tests share: a tune output folder's trials.jsonl, one JSON object a run.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bertfit::testing {

inline std::vector<nlohmann::json> trials_of(const std::string& dir) {
  std::vector<nlohmann::json> v;
  std::ifstream f(dir + "/trials.jsonl");
  for (std::string line; std::getline(f, line);) v.push_back(nlohmann::json::parse(line));
  return v;
}

}  // namespace bertfit::testing
