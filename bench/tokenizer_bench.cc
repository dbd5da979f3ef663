// Tokenizer throughput on one thread: every sentence of GLUE MRPC train (columns 3 and 4 of
// train.tsv, header skipped, split on tabs only) through Tokenizer::tokenize_into for WordPiece,
// byte-level BPE (also with offsets) and SentencePiece, and the same sentences as pairs through
// encode(max_len 128). Reports tokens/s (ids produced, without the template's specials) and
// input bytes/s.
#include <benchmark/benchmark.h>

#include <memory>
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

// The tokenizers compared: WordPiece (bert-base-uncased vocab.txt), byte-level BPE (the 52k
// RoBERTa vocabulary of ../shared/data/roberta-bpe) and SentencePiece (the XLM-R-style 50k model
// of ../shared/data/spm). Loaded once; the BPE word cache warms up in the first iteration.
enum class Kind { kWordPiece, kBpe, kSentencePiece };
const Tokenizer& tokenizer(Kind kind) {
  static const std::unique_ptr<Tokenizer> wordpiece =
      load_tokenizer_file(kShared + "/data/vocab/bert-base-uncased.txt");
  static const std::unique_ptr<Tokenizer> bpe = load_tokenizer(kShared + "/data/roberta-bpe");
  static const std::unique_ptr<Tokenizer> spm = load_tokenizer(kShared + "/data/spm");
  switch (kind) {
    case Kind::kWordPiece:
      return *wordpiece;
    case Kind::kBpe:
      return *bpe;
    case Kind::kSentencePiece:
      return *spm;
  }
  return *wordpiece;
}

// Every sentence alone through tokenize_into (ids only, or ids and offsets).
void BM_TokenizeMrpcTrain(benchmark::State& state, Kind kind, bool offsets) {
  const Corpus& c = mrpc_train();
  const Tokenizer& tok = tokenizer(kind);
  std::size_t tokens = 0;
  std::vector<std::int32_t> ids;
  std::vector<TokenOffset> offs;
  for (auto _ : state) {
    for (std::size_t i = 0; i < c.a.size(); ++i) {
      for (const std::string* text : {&c.a[i], &c.b[i]}) {
        ids.clear();
        offs.clear();
        tok.tokenize_into(*text, ids, offsets ? &offs : nullptr);
        tokens += ids.size();
        benchmark::DoNotOptimize(ids.data());
      }
    }
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["sentences"] = static_cast<double>(2 * c.a.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * c.bytes));
}
BENCHMARK_CAPTURE(BM_TokenizeMrpcTrain, wordpiece, Kind::kWordPiece, false)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_TokenizeMrpcTrain, bpe, Kind::kBpe, false)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_TokenizeMrpcTrain, bpe_offsets, Kind::kBpe, true)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_TokenizeMrpcTrain, sentencepiece, Kind::kSentencePiece, false)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

void BM_EncodePairsMrpcTrain(benchmark::State& state, Kind kind) {
  const Corpus& c = mrpc_train();
  const Tokenizer& tok = tokenizer(kind);
  const auto specials = static_cast<std::size_t>(tok.num_special_tokens(true));
  std::size_t tokens = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < c.a.size(); ++i) {
      const Encoding e = tok.encode(c.a[i], std::string_view(c.b[i]), 128);
      tokens += e.input_ids.size() - specials;
      benchmark::DoNotOptimize(e.input_ids.data());
    }
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * c.bytes));
}
BENCHMARK_CAPTURE(BM_EncodePairsMrpcTrain, wordpiece, Kind::kWordPiece)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_EncodePairsMrpcTrain, bpe, Kind::kBpe)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

}  // namespace
}  // namespace bertfit

BENCHMARK_MAIN();
