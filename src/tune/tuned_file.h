// tuned.json: what `bertfit tune` found, and what `--config tuned.json` applies (serve, predict,
// bench, train, eval, embed). Only "settings" (knob -> value, knobs of space.h's table) is
// applied; the rest is the record: command, objective, machine, measured figures, importance,
// the equivalent command line. Every key is checked on reading: an unknown key, an unknown knob
// or a value outside the knob's domain on this machine is a one-line Error naming the file.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tune/space.h"

namespace bertfit::tune {

struct TunedFile {
  std::string command;    // "serve", "infer" or "train": the tuned command
  std::string objective;  // "latency-p50", ...
  std::string unit;       // "ms", "req/s", "samples/s"
  std::string model;      // the --model tuned with (a record: any model may use the file)
  SpaceContext context;   // global_batch and max_tokens the knobs' values were chosen for
  Setting settings;       // knob -> value: what --config applies
  nlohmann::json machine = nlohmann::json::object();     // cpu, cores, vnni, native_bf16
  nlohmann::json measured = nlohmann::json::object();    // best/defaults mean and runs, gain
  nlohmann::json importance = nlohmann::json::object();  // knob -> share of the variance
  std::string command_line;                              // the setting as one shell command
};

void write_tuned_file(const std::string& path, const TunedFile& file);

// Throws Error "--config PATH: ..." in one line for any defect (flag names what to blame).
TunedFile read_tuned_file(const std::string& path, const Machine& machine,
                          const std::string& flag = "--config");

}  // namespace bertfit::tune
