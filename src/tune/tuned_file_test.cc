// tuned.json (tuned_file.h): the round trip, the file as written (pretty, atomic), and the exact
// one-line message of every defect a reader can meet.
#include "tune/tuned_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/util/errors.h"
#include "tests/util/temp_dir.h"

namespace bertfit::tune {
namespace {

using testing::error_of;
using testing::TempDir;

Machine two_cores() {
  Machine m;
  m.cores = 2;
  m.int8 = m.bf16 = true;
  m.tcmalloc = "/lib/tc.so";
  m.mpi = true;
  m.cpu = "Test CPU";
  return m;
}

TunedFile sample() {
  TunedFile f;
  f.command = "serve";
  f.objective = "latency-p50";
  f.unit = "ms";
  f.model = "models/sst2";
  f.context = {.global_batch = 16, .max_tokens = 1024};
  f.settings = {{"threads", "2"},
                {"wait", "active"},
                {"allocator", "tcmalloc"},
                {"max_batch_tokens", "2048"}};
  f.machine = {{"cpu", "Test CPU"}, {"cores", 2}};
  f.measured = {{"best", {{"mean", 3.5}, {"runs", 3}}}, {"gain", 0.2}};
  f.importance = {{"threads", 0.7}, {"wait", 0.3}};
  f.command_line = "OMP_WAIT_POLICY=active bertfit serve --threads 2";
  return f;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(TunedFile, RoundTrip) {
  TempDir tmp;
  const std::string path = tmp / "tuned.json";
  const TunedFile f = sample();
  write_tuned_file(path, f);
  const TunedFile g = read_tuned_file(path, two_cores());
  EXPECT_EQ(g.command, f.command);
  EXPECT_EQ(g.objective, f.objective);
  EXPECT_EQ(g.unit, f.unit);
  EXPECT_EQ(g.model, f.model);
  EXPECT_EQ(g.context.global_batch, 16);
  EXPECT_EQ(g.context.max_tokens, 1024);
  EXPECT_EQ(g.settings, f.settings);
  EXPECT_EQ(g.machine, f.machine);
  EXPECT_EQ(g.measured, f.measured);
  EXPECT_EQ(g.importance, f.importance);
  EXPECT_EQ(g.command_line, f.command_line);
}

TEST(TunedFile, WrittenPrettyInOrderAndAtomically) {
  TempDir tmp;
  const std::string path = tmp / "tuned.json";
  write_tuned_file(path, sample());
  const std::string text = read(path);
  EXPECT_EQ(text.rfind("{\n  \"bertfit_tune\": 1,\n  \"command\": \"serve\",\n", 0), 0u) << text;
  // Settings in the knob table's order, not alphabetical.
  const std::size_t threads = text.find("\"threads\": \"2\""), wait = text.find("\"wait\"");
  const std::size_t allocator = text.find("\"allocator\""), tokens = text.find("\"max_batch_t");
  EXPECT_LT(threads, wait);
  EXPECT_LT(wait, allocator);
  EXPECT_LT(allocator, tokens);
  EXPECT_NE(tokens, std::string::npos);
  EXPECT_EQ(text.back(), '\n');
  for (const auto& entry : std::filesystem::directory_iterator(tmp.path())) {
    EXPECT_EQ(entry.path().filename(), "tuned.json");  // no temporary file left
  }
  TunedFile bad = sample();
  bad.settings["omp_wait"] = "active";
  EXPECT_EQ(error_of([&] { write_tuned_file(path, bad); }), path + ": unknown knob 'omp_wait'");
}

// The error reading `text` as tmp/t.json (the path in the message replaced by "t.json").
std::string error_reading(const std::string& text, const Machine& m = two_cores()) {
  TempDir tmp;
  const std::string path = tmp / "t.json";
  write(path, text);
  std::string e = error_of([&] { read_tuned_file(path, m); });
  const std::size_t at = e.find(path);
  if (at != std::string::npos) e.replace(at, path.size(), "t.json");
  return e;
}

TEST(TunedFile, NotJsonSaysWhere) {
  EXPECT_EQ(error_reading("{\n  \"bertfit_tune\": 1,\n  \"settings\" {}\n}\n"),
            "--config t.json: not JSON (line 3, column 14)");
  EXPECT_EQ(error_reading("x"), "--config t.json: not JSON (line 1, column 1)");
  EXPECT_EQ(error_reading(""), "--config t.json: not JSON (line 1, column 1)");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1,\n"),
            "--config t.json: not JSON (line 2, column 1)");
}

TEST(TunedFile, EveryDefectIsOneLineNamingTheFile) {
  const std::string no_key =
      "--config t.json: not a file written by bertfit tune (no \"bertfit_tune\" key)";
  EXPECT_EQ(error_reading("{\"settings\": {}}"), no_key);
  EXPECT_EQ(error_reading("[1, 2]"), no_key);
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 2, \"settings\": {}}"),
            "--config t.json: version 2 of bertfit tune's files; this bertfit reads version 1");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": \"1\", \"settings\": {}}"),
            "--config t.json: 'bertfit_tune' must be the files' version number, not \"1\"");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"setings\": {}}"),
            "--config t.json: unknown key 'setings'; did you mean 'settings'?");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"zzz\": {}}"),
            "--config t.json: unknown key 'zzz'");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1}"),
            "--config t.json: no \"settings\" key: nothing to apply");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"settings\": []}"),
            "--config t.json: 'settings' must be an object, not []");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"command\": 3, \"settings\": {}}"),
            "--config t.json: 'command' must be a string, not 3");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"settings\": {\"omp_wait\": \"active\"}}"),
            "--config t.json: unknown knob 'omp_wait'; did you mean 'wait'?");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"settings\": {\"treads\": \"2\"}}"),
            "--config t.json: unknown knob 'treads'; did you mean 'threads'?");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"settings\": {\"colour\": \"2\"}}"),
            "--config t.json: unknown knob 'colour'");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"settings\": {\"a\\nb\": \"2\"}}"),
            "--config t.json: unknown knob '\"a\\nb\"'");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"settings\": {\"allocator\": \"tcmaloc\"}}"),
            "--config t.json: knob 'allocator': 'tcmaloc' is not one of glibc, tcmalloc on this "
            "machine");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"settings\": {\"threads\": 2}}"),
            "--config t.json: knob 'threads': give the value as a string, \"2\"");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"settings\": {\"threads\": \"2\\n\"}}"),
            "--config t.json: knob 'threads': \"2\\n\" is not one of its values");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"settings\": {\"threads\": \"8\"}}"),
            "--config t.json: knob 'threads': '8' is not one of 1, 2 on this machine");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"context\": {\"global_batch\": 0}, "
                          "\"settings\": {}}"),
            "--config t.json: 'context.global_batch' must be a positive whole number, not 0");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"context\": {\"max_token\": 5}, "
                          "\"settings\": {}}"),
            "--config t.json: unknown key 'context.max_token'; did you mean 'max_tokens'?");
  EXPECT_EQ(error_reading("{\"bertfit_tune\": 1, \"machine\": 3, \"settings\": {}}"),
            "--config t.json: 'machine' must be an object, not 3");
}

TEST(TunedFile, TheContextDecidesTheDomain) {
  // micro_batch 64 is a value only for a global batch it divides and does not exceed.
  const std::string file =
      "{\"bertfit_tune\": 1, \"context\": {\"global_batch\": %d}, "
      "\"settings\": {\"micro_batch\": \"8\"}}";
  char text[200];
  std::snprintf(text, sizeof text, file.c_str(), 32);
  EXPECT_EQ(error_reading(text), "");
  std::snprintf(text, sizeof text, file.c_str(), 4);
  EXPECT_EQ(error_reading(text),
            "--config t.json: knob 'micro_batch': '8' is not one of 4 on this machine");
}

TEST(TunedFile, AMissingFileOrAFolderIsNamed) {
  TempDir tmp;
  EXPECT_EQ(error_of([&] { read_tuned_file(tmp / "none.json", two_cores()); }),
            "--config " + (tmp / "none.json") + ": cannot open (No such file or directory)");
  EXPECT_EQ(error_of([&] { read_tuned_file(tmp.path(), two_cores(), "--x"); }),
            "--x " + tmp.path() + ": is a directory, expected a file");
}

}  // namespace
}  // namespace bertfit::tune
