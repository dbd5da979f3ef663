// Tokenizer throughput on one thread: every sentence of GLUE MRPC train (columns 3 and 4 of
// train.tsv, header skipped, split on tabs only) through WordPieceTokenizer::tokenize_ids, and
// the same sentences as pairs through encode(max_len 128). Reports tokens/s (ids produced,
// without [CLS]/[SEP]) and input bytes/s.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "base/file.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {
namespace {

const std::string kShared = BERTFIT_SHARED_DIR;

struct Corpus {
  std::vector<std::string> a, b;  // #1 String, #2 String of each row
  std::size_t bytes = 0;
};

std::vector<std::string> split_tabs(std::string_view line) {
  std::vector<std::string> cols;
  std::size_t start = 0;
  for (std::size_t tab; (tab = line.find('\t', start)) != std::string_view::npos; start = tab + 1) {
    cols.emplace_back(line.substr(start, tab - start));
  }
  cols.emplace_back(line.substr(start));
  return cols;
}

const Corpus& mrpc_train() {
  static const Corpus corpus = [] {
    const std::string path = kShared + "/data/glue/MRPC/train.tsv";
    const std::string data = read_file(path);
    Corpus c;
    std::size_t start = data.find('\n') + 1;  // header row
    int line_no = 1;
    while (start < data.size()) {
      std::size_t end = data.find('\n', start);
      if (end == std::string::npos) end = data.size();
      std::string_view line(data.data() + start, end - start);
      ++line_no;
      start = end + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) continue;
      const auto cols = split_tabs(line);
      if (cols.size() < 5) throw_error(path, ":", line_no, ": expected 5 tab-separated columns");
      c.a.push_back(cols[3]);
      c.b.push_back(cols[4]);
      c.bytes += cols[3].size() + cols[4].size();
    }
    return c;
  }();
  return corpus;
}

const WordPieceTokenizer& tokenizer() {
  static const WordPieceTokenizer tok =
      WordPieceTokenizer::from_vocab_file(kShared + "/data/vocab/bert-base-uncased.txt");
  return tok;
}

void BM_TokenizeMrpcTrain(benchmark::State& state) {
  const Corpus& c = mrpc_train();
  const WordPieceTokenizer& tok = tokenizer();
  std::size_t tokens = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < c.a.size(); ++i) {
      const auto a = tok.tokenize_ids(c.a[i]);
      const auto b = tok.tokenize_ids(c.b[i]);
      tokens += a.size() + b.size();
      benchmark::DoNotOptimize(a.data());
      benchmark::DoNotOptimize(b.data());
    }
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["sentences"] = static_cast<double>(2 * c.a.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * c.bytes));
}
BENCHMARK(BM_TokenizeMrpcTrain)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_EncodePairsMrpcTrain(benchmark::State& state) {
  const Corpus& c = mrpc_train();
  const WordPieceTokenizer& tok = tokenizer();
  std::size_t tokens = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < c.a.size(); ++i) {
      const Encoding e = tok.encode(c.a[i], std::string_view(c.b[i]), 128);
      tokens += e.input_ids.size() - 3;
      benchmark::DoNotOptimize(e.input_ids.data());
    }
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * c.bytes));
}
BENCHMARK(BM_EncodePairsMrpcTrain)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
}  // namespace bertfit

BENCHMARK_MAIN();
