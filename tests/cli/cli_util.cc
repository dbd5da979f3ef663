// Implementation of the end-to-end test helpers.
#include "cli_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/safetensors.h"
#include "tests/util/compare.h"

namespace bertfit::testing {

std::string bertfit_binary() { return std::string(BERTFIT_BINARY_DIR) + "/apps/bertfit/bertfit"; }
std::string shared_dir() { return BERTFIT_SHARED_DIR; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

RunResult run_bertfit(const std::string& args) { return run_bertfit_stdin(args, ""); }

RunResult run_bertfit_stdin(const std::string& args, const std::string& input) {
  TempDir tmp;
  write_text(tmp / "in", input);
  std::string cmd = bertfit_binary() + " " + args + " <" + (tmp / "in") + " >" + (tmp / "out") +
                    " 2>" + (tmp / "err");
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(tmp / "out");
  r.err = read_text(tmp / "err");
  return r;
}

void init_tiny_model(const std::string& dir, const std::string& arch, int num_labels, int seed) {
  std::string sizes = arch == "distilbert"
                          ? "--set n_layers=2 --set dim=32 --set hidden_dim=64 --set n_heads=2"
                          : "--set num_hidden_layers=2 --set hidden_size=32 "
                            "--set intermediate_size=64 --set num_attention_heads=2";
  RunResult r =
      run_bertfit("init --arch " + arch + " --output " + dir + " " + sizes + " --num-labels " +
                  std::to_string(num_labels) + " --seed " + std::to_string(seed));
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

std::string last_line(const std::string& out) {
  const auto end = out.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  const auto begin = out.rfind('\n', end);
  const std::size_t start = begin == std::string::npos ? 0 : begin + 1;
  return out.substr(start, end + 1 - start);
}

std::map<std::string, std::vector<float>> tensors_of(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  std::map<std::string, std::vector<float>> out;
  for (const TensorInfo& t : f.tensors()) {
    if (!is_floating(t.dtype)) continue;  // buffers such as position_ids
    std::vector<float>& v = out[t.name];
    v.resize(t.shape.numel());
    f.read_f32(t, v.data());
  }
  return out;
}

std::vector<float> all_params(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  std::vector<float> out;
  for (const TensorInfo& t : f.tensors()) {
    if (!is_floating(t.dtype)) continue;
    std::vector<float> v(t.shape.numel());
    f.read_f32(t, v.data());
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void expect_final_parameters(const std::string& weights, const std::string& golden_dir,
                             const nlohmann::json& t) {
  double lr_sum = 0;
  for (const auto& lr : t["lrs"]) lr_sum += lr.get<double>();
  SafetensorsFile want = SafetensorsFile::open(golden_dir + "/golden.safetensors");
  for (const auto& [name, values] : tensors_of(weights)) {
    const std::vector<float> ref = read_tensor(want, "final." + name);
    ASSERT_EQ(values.size(), ref.size()) << name;
    if (name.ends_with("attention.self.key.bias")) {
      for (std::size_t i = 0; i < ref.size(); ++i)
        EXPECT_LE(std::fabs(double{values[i]} - ref[i]), 2 * lr_sum) << name << " " << i;
      continue;
    }
    EXPECT_LT(rel_err(values, ref), 2e-3) << name;
  }
}

std::string char_slice(const std::string& text, std::int64_t start, std::int64_t end) {
  std::vector<std::size_t> at;  // byte offset of each code point
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) at.push_back(i);
  }
  at.push_back(text.size());
  const auto n = static_cast<std::int64_t>(at.size()) - 1;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  return text.substr(at[start], at[end] - at[start]);
}

std::vector<std::string> fixture_texts(const std::string& dir) {
  return nlohmann::json::parse(read_text(dir + "/texts.json"))["texts"]
      .get<std::vector<std::string>>();
}

std::string write_text_rows(const std::string& path, const std::vector<std::string>& texts) {
  std::string jsonl;
  for (const std::string& t : texts) jsonl += nlohmann::json{{"text", t}}.dump() + "\n";
  write_text(path, jsonl);
  return path;
}

std::vector<std::vector<float>> golden_embeddings(const std::string& safetensors, std::size_t n) {
  const std::vector<float> flat = tensors_of(safetensors).at("eval.embeddings");
  const std::size_t d = flat.size() / n;
  EXPECT_EQ(d * n, flat.size());
  std::vector<std::vector<float>> rows;
  for (std::size_t i = 0; i < n; ++i) {
    rows.emplace_back(flat.begin() + i * d, flat.begin() + (i + 1) * d);
  }
  return rows;
}

std::vector<std::vector<float>> embeddings_of(const std::string& out) {
  std::vector<std::vector<float>> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) {
      rows.push_back(nlohmann::json::parse(line)["embedding"].get<std::vector<float>>());
    }
  }
  return rows;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    m = std::max(m, std::abs(double{a[i]} - b[i]));
  }
  return m;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ab += double{a[i]} * b[i];
    aa += double{a[i]} * a[i];
    bb += double{b[i]} * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

}  // namespace bertfit::testing
