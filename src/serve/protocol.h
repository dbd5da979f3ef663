// The request bodies of `bertfit serve`, as Hugging Face text-embeddings-inference (TEI) defines
// them, decoded and checked without the model: /predict's inputs (a text, one pair, or a batch of
// texts and pairs) and options, /tokenize's inputs, and the encoding of one input with the
// model's length limit and either truncation direction. Everything a client can get wrong is an
// ApiError carrying the HTTP status and TEI's error_type; nothing here aborts on a request.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace bertfit::serve {

// A refusal the client caused: status (400, 401, 413, 422, 429, ...), TEI's error_type
// ("validation", "empty", "tokenizer", "overloaded", "unauthorized", ...), a message, and the
// reason /metrics counts it under (default: the error_type; finer where one type has several
// causes, e.g. "queue_full" beside "overloaded").
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string reason = "")
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        reason_(reason.empty() ? type_ : std::move(reason)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& reason() const { return reason_; }

 private:
  int status_;
  std::string type_;
  std::string reason_;
};

// {"error": message, "error_type": type}
std::string error_body(const std::string& type, const std::string& message);

// True when text is well-formed UTF-8 (no overlong forms, surrogates or code points above
// U+10FFFF).
bool valid_utf8(std::string_view text);

// One input: a text, or a pair of texts (a sentence pair, encoded [CLS] a [SEP] b [SEP]), or
// (the embedding routes, as TEI's InputType::Ids) the model's token ids as sent: the encoding
// is those ids verbatim (special tokens are the client's), type 0 throughout.
struct TextInput {
  TextInput() = default;
  TextInput(std::string text, std::optional<std::string> pair = std::nullopt,
            std::optional<std::vector<std::int64_t>> token_ids = std::nullopt)
      : a(std::move(text)), b(std::move(pair)), ids(std::move(token_ids)) {}
  std::string a;
  std::optional<std::string> b;
  std::optional<std::vector<std::int64_t>> ids;
};

enum class TruncationDirection { kRight, kLeft };

// POST /predict: {"inputs": "text" | ["a", "b"] (one pair) | [seq, ...] (a batch, each seq a
// text, [text] or [a, b]), "truncate": bool|null, "truncation_direction": "right"|"left",
// "raw_scores": bool, "aggregation_strategy": "name" (also as the Hub's inference API sends it,
// in "parameters": {"aggregation_strategy": "name"})}. As TEI's untagged types decide it, a list
// of exactly two texts is one pair, any other list a batch (InputShape::kTextsOrPairs); a model
// that takes one text per input (kTexts, a token classifier) reads every list as a batch of
// texts, as the Hub's token-classification API does, and refuses pairs in it (422). Unknown
// keys are ignored.
enum class InputShape { kTextsOrPairs, kTexts };

struct PredictRequest {
  std::vector<TextInput> inputs;
  bool batch = false;            // the answer is a list of answers, one per input
  std::optional<bool> truncate;  // null or absent: the server's --auto-truncate
  TruncationDirection direction = TruncationDirection::kRight;
  bool raw_scores = false;                          // scores are the logits
  std::optional<std::string> aggregation_strategy;  // as given (the service checks the name)
};

// Throws ApiError: 422 for a body that is not UTF-8, 400 for malformed JSON or wrong types (a NUL
// byte anywhere, bytes after the JSON value, or a key given twice in any object, or in both the
// top level and "parameters", are malformed; the duplicate check is linear in the body), 400
// ("empty") for an empty batch, 413 for a batch of more than max_client_batch_size inputs.
PredictRequest decode_predict_request(std::string_view body, int max_client_batch_size,
                                      InputShape shape = InputShape::kTextsOrPairs);

// The embedding routes' inputs (as TEI's untagged Input of InputType): a text, a list of token
// ids (one input: [101, 7592, 102]), or a list of texts and id lists (a batch). Each id must
// be an integer in [0, 2^32) (400 otherwise; encode_input checks it against the vocabulary).
// POST /embed: {"inputs": "text" | ["text", ...], "normalize": bool (true), "truncate":
// bool|null, "truncation_direction", "prompt_name": "name"|null, "dimensions": int|null}; the
// answer is always a list of vectors. Same errors as decode_predict_request.
struct EmbedRequest {
  std::vector<TextInput> inputs;
  bool normalize = true;
  std::optional<bool> truncate;
  TruncationDirection direction = TruncationDirection::kRight;
  std::optional<std::string> prompt_name;
  std::optional<int> dimensions;
};
EmbedRequest decode_embed_request(std::string_view body, int max_client_batch_size);

// POST /embed_all: {"inputs": "text" | ["text", ...], "truncate": bool|null,
// "truncation_direction", "prompt_name": "name"|null}; the answer is, per input, every token's
// vector. Same errors as decode_predict_request.
struct EmbedAllRequest {
  std::vector<TextInput> inputs;
  std::optional<bool> truncate;
  TruncationDirection direction = TruncationDirection::kRight;
  std::optional<std::string> prompt_name;
};
EmbedAllRequest decode_embed_all_request(std::string_view body, int max_client_batch_size);

// POST /similarity: {"inputs": {"source_sentence": "text", "sentences": ["text", ...]},
// "parameters": {"truncate": bool|null, "truncation_direction", "prompt_name": "name"|null} |
// null}. As TEI: an empty `sentences` is a 400 ("empty"), and the source counts in the batch
// (413 past max_client_batch_size with it).
struct SimilarityRequest {
  std::string source;
  std::vector<std::string> sentences;
  std::optional<bool> truncate;
  TruncationDirection direction = TruncationDirection::kRight;
  std::optional<std::string> prompt_name;
};
SimilarityRequest decode_similarity_request(std::string_view body, int max_client_batch_size);

// POST /decode: {"ids": [id, ...] | [[id, ...], ...], "skip_special_tokens": bool (true)}; the
// answer is always a list of texts. As TEI's untagged types read it, [] is one empty list; a
// list of lists is a batch (400 "empty" when empty is impossible then; 413 past
// max_client_batch_size). Each id must be an integer in [0, 2^32) (400 otherwise; the service
// checks it against the vocabulary).
struct DecodeRequest {
  std::vector<std::vector<std::int64_t>> ids;
  bool skip_special_tokens = true;
};
DecodeRequest decode_decode_request(std::string_view body, int max_client_batch_size);

// POST /v1/embeddings (and /embeddings), OpenAI's form (which TEI serves too): {"input": "text"
// | ["text", ...] | [id, ...] | [[id, ...], ...], "model": "name" (the answer names the served
// model, as TEI), "encoding_format": "float" | "base64", "dimensions": int|null}.
struct OpenAiEmbedRequest {
  std::vector<TextInput> inputs;
  std::string model;
  bool base64 = false;  // each vector as base64 of its little-endian float32 bytes
  std::optional<int> dimensions;
};
OpenAiEmbedRequest decode_openai_embed_request(std::string_view body, int max_client_batch_size);

// POST /rerank: {"query": "text", "texts": ["text", ...], "truncate": bool|null,
// "truncation_direction", "raw_scores": bool, "return_text": bool}; each text is scored as the
// pair (query, text). Same errors as decode_predict_request (the batch is `texts`).
struct RerankRequest {
  std::string query;
  std::vector<std::string> texts;
  std::optional<bool> truncate;
  TruncationDirection direction = TruncationDirection::kRight;
  bool raw_scores = false;
  bool return_text = false;
};
RerankRequest decode_rerank_request(std::string_view body, int max_client_batch_size);

// POST /tokenize: {"inputs": "text" | ["text", ...], "add_special_tokens": bool (true)}; the
// answer is always a list, one token list per input. Same errors as decode_predict_request.
struct TokenizeRequest {
  std::vector<std::string> inputs;
  bool add_special_tokens = true;
};
TokenizeRequest decode_tokenize_request(std::string_view body, int max_client_batch_size);

// The encoding of one input for the model: [CLS] a [SEP] (b [SEP]) in at most max_len tokens.
// Longer inputs are cut with Hugging Face's longest_first rule (one token at a time from the
// longer text, from b on ties) at the end of each text (kRight, what `bertfit predict` does) or at
// its start (kLeft) when truncate is set, and refused otherwise (ApiError 422). with_offsets:
// the encoding's offsets (each token's bytes in its text) are filled. Token ids (input.ids) are
// taken as they are, cut to max_len the same way (422 past it without truncate); an id outside
// the tokenizer's vocabulary is a 422 naming it, an empty list a 400 ("empty").
Encoding encode_input(const Tokenizer& tokenizer, const TextInput& input, bool truncate,
                      TruncationDirection direction, int max_len, bool with_offsets = false);
// encode_input of the pair (a, b) whose first text is already tokenized (a: its tokens, from
// Tokenizer::tokenize_into of its input_text), without offsets: /rerank tokenizes its query once.
Encoding encode_pair(const Tokenizer& tokenizer, const std::vector<std::int32_t>& a,
                     const std::string& b, bool truncate, TruncationDirection direction,
                     int max_len);

}  // namespace bertfit::serve
