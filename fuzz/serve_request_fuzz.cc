// libFuzzer target: arbitrary bytes as the body of POST /predict, /embed, /v1/embeddings,
// /rerank and /tokenize (serve/protocol.h), and each decoded input encoded for a model of 64
// positions with and without truncation, in both directions; also as a token classifier reads it
// (texts only, with offsets inside the text). A body either decodes or is refused with an ApiError
// of a 4xx status; nothing else may escape. Checks: a decoded request has 1..max inputs, an
// encoding fits max_len and starts with [CLS], a refusal's error body is JSON, a body with a key
// twice in any object (an independent SAX check) is never decoded. The vocabulary is
// bert-base-uncased from $BERTFIT_FUZZ_VOCAB, else BERTFIT_SHARED_DIR/data/vocab/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_tokenizer.h"
#include "serve/protocol.h"

namespace {

using bertfit::serve::ApiError;

constexpr int kMaxBatch = 8;
constexpr int kMaxLen = 64;

using bertfit::fuzz::tokenizer;

// An independent duplicate-key oracle (issue 43): nlohmann's SAX events, each object's keys in a
// std::set. True when some object, at any depth, has a key twice.
struct DuplicateKeys : nlohmann::json_sax<nlohmann::json> {
  std::vector<std::set<std::string>> open;
  bool found = false;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!open.back().insert(k).second) found = true;
    return true;
  }
  bool end_object() override {
    open.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

bool has_duplicate_key(std::string_view body) {
  DuplicateKeys sax;
  nlohmann::json::sax_parse(body, &sax, nlohmann::json::input_format_t::json, false);
  return sax.found;
}

void check_refusal(const ApiError& e) {
  if (e.status() < 400 || e.status() > 499) std::abort();
  nlohmann::json j = nlohmann::json::parse(bertfit::serve::error_body(e.type(), e.what()));
  if (!j.contains("error") || !j.contains("error_type")) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  using namespace bertfit::serve;
  const bool duplicate = has_duplicate_key(body);
  try {
    PredictRequest r = decode_predict_request(body, kMaxBatch);
    if (duplicate) std::abort();  // a key twice at any depth is refused
    if (r.inputs.empty() || r.inputs.size() > kMaxBatch) std::abort();
    if (!r.batch && r.inputs.size() != 1) std::abort();
    for (const TextInput& in : r.inputs) {
      for (bool truncate : {true, false}) {
        for (auto dir : {TruncationDirection::kRight, TruncationDirection::kLeft}) {
          try {
            bertfit::Encoding e = encode_input(tokenizer(), in, truncate, dir, kMaxLen);
            if (e.input_ids.size() > kMaxLen || e.input_ids.size() < 2) std::abort();
            if (e.input_ids.front() != tokenizer().cls_id()) std::abort();
            if (e.token_type_ids.size() != e.input_ids.size()) std::abort();
          } catch (const ApiError& e) {
            if (truncate || e.status() != 422) std::abort();  // only a refused long input
          }
        }
      }
    }
  } catch (const ApiError& e) {
    check_refusal(e);
  }
  // As a token classifier reads it: texts only, each encoded with its offsets.
  try {
    PredictRequest r = decode_predict_request(body, kMaxBatch, InputShape::kTexts);
    if (r.inputs.empty() || r.inputs.size() > kMaxBatch) std::abort();
    for (const TextInput& in : r.inputs) {
      if (in.b) std::abort();
      for (auto dir : {TruncationDirection::kRight, TruncationDirection::kLeft}) {
        bertfit::Encoding e = encode_input(tokenizer(), in, true, dir, kMaxLen, true);
        if (e.offsets.size() != e.input_ids.size()) std::abort();
        for (const bertfit::TokenOffset& o : e.offsets) {
          if (o.begin > o.end || o.end > in.a.size()) std::abort();
        }
      }
    }
  } catch (const ApiError& e) {
    check_refusal(e);
  }
  try {
    EmbedRequest e = decode_embed_request(body, kMaxBatch);
    if (e.inputs.empty() || e.inputs.size() > kMaxBatch) std::abort();
  } catch (const ApiError& e) {
    check_refusal(e);
  }
  try {
    RerankRequest e = decode_rerank_request(body, kMaxBatch);
    if (e.texts.empty() || e.texts.size() > kMaxBatch) std::abort();
  } catch (const ApiError& e) {
    check_refusal(e);
  }
  try {
    OpenAiEmbedRequest e = decode_openai_embed_request(body, kMaxBatch);
    if (e.inputs.empty() || e.inputs.size() > kMaxBatch) std::abort();
  } catch (const ApiError& e) {
    check_refusal(e);
  }
  try {
    TokenizeRequest t = decode_tokenize_request(body, kMaxBatch);
    if (t.inputs.empty() || t.inputs.size() > kMaxBatch) std::abort();
  } catch (const ApiError& e) {
    check_refusal(e);
  }
  try {
    EmbedAllRequest e = decode_embed_all_request(body, kMaxBatch);
    if (e.inputs.empty() || e.inputs.size() > kMaxBatch) std::abort();
  } catch (const ApiError& e) {
    check_refusal(e);
  }
  try {
    SimilarityRequest s = decode_similarity_request(body, kMaxBatch);
    if (s.sentences.empty() || s.sentences.size() + 1 > kMaxBatch) std::abort();
  } catch (const ApiError& e) {
    check_refusal(e);
  }
  try {
    DecodeRequest d = decode_decode_request(body, kMaxBatch);
    if (d.ids.empty() || d.ids.size() > kMaxBatch) std::abort();
    for (const auto& ids : d.ids) {
      for (const std::int64_t id : ids) {
        if (id < 0 || id > 0xFFFFFFFFll) std::abort();
      }
    }
  } catch (const ApiError& e) {
    check_refusal(e);
  }
  return 0;
}
