// Decoding of the TEI request bodies and encoding of one input (see protocol.h).
#include "serve/protocol.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "base/error.h"
#include "tokenizer/normalizer.h"

namespace bertfit::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad_request(const std::string& message) {
  throw ApiError(400, "validation", message);
}

// The body as JSON: 422 if it is not UTF-8 (TEI refuses such text as a tokenizer error), 400
// if it is not JSON or not an object. nlohmann's lexer takes a NUL byte for the end of the input
// (so `{...}\0garbage` would parse), and JSON allows no raw NUL anywhere, even inside a string:
// a body holding one is refused before parsing. A key given twice in any object, at any depth,
// is refused too (nlohmann keeps the last, another parser the first: the two would read
// different requests); each object's keys go into a hash set, so the check is linear in the body.
json parse_body(std::string_view body) {
  if (!valid_utf8(body)) throw ApiError(422, "tokenizer", "the request body is not valid UTF-8");
  if (body.find('\0') != std::string_view::npos) {
    bad_request("the request body is not valid JSON (a NUL byte)");
  }
  std::vector<std::unordered_set<std::string>> open;  // the keys of each object being parsed
  std::string duplicate;
  const json::parser_callback_t note_keys = [&](int /*depth*/, json::parse_event_t event,
                                                json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open.empty() && duplicate.empty() &&
            !open.back().insert(parsed.get_ref<const std::string&>()).second) {
          duplicate = parsed.get_ref<const std::string&>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  json j = json::parse(body, note_keys, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad_request("the request body is not valid JSON");
  if (!j.is_object()) bad_request("the request body must be a JSON object");
  if (!duplicate.empty()) bad_request(cat("the key `", duplicate, "` is given twice"));
  return j;
}

// The value of an optional boolean key (absent or null: nullopt).
std::optional<bool> optional_bool(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) bad_request(cat("`", key, "` must be a boolean"));
  return it->get<bool>();
}

// The value of an optional string key (absent or null: nullopt).
std::optional<std::string> optional_string(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) bad_request(cat("`", key, "` must be a string"));
  return it->get<std::string>();
}

// "dimensions": an integer or null (the service checks its range).
std::optional<int> optional_dimensions(const json& j) {
  auto dims = j.find("dimensions");
  if (dims == j.end() || dims->is_null()) return std::nullopt;
  if (!dims->is_number_integer()) bad_request("`dimensions` must be an integer");
  return static_cast<int>(std::clamp<std::int64_t>(dims->get<std::int64_t>(), -1, 1 << 30));
}

// "truncation_direction": "right" (default) or "left", either capitalized.
TruncationDirection direction_of(const json& j) {
  auto dir = j.find("truncation_direction");
  if (dir == j.end() || dir->is_null()) return TruncationDirection::kRight;
  const std::string word = dir->is_string() ? dir->get<std::string>() : "";
  if (word == "right" || word == "Right") return TruncationDirection::kRight;
  if (word == "left" || word == "Left") return TruncationDirection::kLeft;
  bad_request("`truncation_direction` must be \"right\" or \"left\"");
}

void check_batch_size(std::size_t n, int max_client_batch_size, const char* key = "inputs") {
  if (n == 0) throw ApiError(400, "empty", cat("`", key, "` cannot be empty"));
  if (n > static_cast<std::size_t>(max_client_batch_size)) {
    throw ApiError(413, "validation",
                   cat("batch size ", n, " > maximum allowed batch size ", max_client_batch_size));
  }
}

// A text or a non-empty list of texts under `key`.
std::vector<std::string> texts_at(const json& j, const char* key, int max_client_batch_size) {
  auto inputs = j.find(key);
  if (inputs == j.end()) bad_request(cat("missing field `", key, "`"));
  std::vector<std::string> texts;
  if (inputs->is_string()) {
    texts.push_back(inputs->get<std::string>());
  } else if (inputs->is_array()) {
    check_batch_size(inputs->size(), max_client_batch_size, key);
    for (const json& t : *inputs) {
      if (!t.is_string()) bad_request(cat("`", key, "` must be a text or a list of texts"));
      texts.push_back(t.get<std::string>());
    }
  } else {
    bad_request(cat("`", key, "` must be a text or a list of texts"));
  }
  return texts;
}

// A JSON list of token ids as TEI's Vec<u32> reads it (400 for anything else).
std::vector<std::int64_t> id_list(const json& list, const char* key) {
  std::vector<std::int64_t> out;
  out.reserve(list.size());
  for (const json& id : list) {
    if (!id.is_number_unsigned() || id.get<std::uint64_t>() > 0xFFFFFFFFu) {
      bad_request(cat("`", key,
                      "` token ids must be integers from 0 to 4294967295 (a list of ids is one "
                      "input; a batch is a list of texts and id lists)"));
    }
    out.push_back(static_cast<std::int64_t>(id.get<std::uint64_t>()));
  }
  return out;
}

// An embedding route's inputs under `key`: a text, one list of token ids, or a non-empty batch
// of texts and id lists (TEI's untagged Input: a list of integers is one input).
std::vector<TextInput> embed_inputs_at(const json& j, const char* key, int max_client_batch_size) {
  auto inputs = j.find(key);
  if (inputs == j.end()) bad_request(cat("missing field `", key, "`"));
  std::vector<TextInput> out;
  const char* shape = "` must be a text, a list of token ids, or a list of texts and id lists";
  if (inputs->is_string()) {
    out.push_back({inputs->get<std::string>(), std::nullopt, std::nullopt});
  } else if (inputs->is_array() && !inputs->empty() && inputs->front().is_number()) {
    out.push_back({"", std::nullopt, id_list(*inputs, key)});
  } else if (inputs->is_array()) {
    check_batch_size(inputs->size(), max_client_batch_size, key);
    out.reserve(inputs->size());
    for (const json& t : *inputs) {
      if (t.is_string()) {
        out.push_back({t.get<std::string>(), std::nullopt, std::nullopt});
      } else if (t.is_array()) {
        out.push_back({"", std::nullopt, id_list(t, key)});
      } else {
        bad_request(cat("`", key, shape));
      }
    }
  } else {
    bad_request(cat("`", key, shape));
  }
  return out;
}

// One element of a batch: "text", ["text"] or ["a", "b"].
TextInput sequence(const json& j, std::size_t index) {
  if (j.is_string()) return {j.get<std::string>(), std::nullopt, std::nullopt};
  if (j.is_array() && (j.size() == 1 || j.size() == 2) &&
      std::all_of(j.begin(), j.end(), [](const json& t) { return t.is_string(); })) {
    TextInput in{j[0].get<std::string>(), std::nullopt, std::nullopt};
    if (j.size() == 2) in.b = j[1].get<std::string>();
    return in;
  }
  bad_request(cat("`inputs[", index, "]` must be a text, [text] or [text, text_pair]"));
}

}  // namespace

std::string error_body(const std::string& type, const std::string& message) {
  // Messages may quote client bytes; dump() replaces anything that is not UTF-8.
  return json{{"error", message}, {"error_type", type}}.dump(-1, ' ', false,
                                                             json::error_handler_t::replace);
}

bool valid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    if (*p < 0x80) {
      ++p;
      continue;
    }
    const auto* start = p;
    // decode_utf8 reads an invalid byte as U+FFFD and advances by one; a real U+FFFD has three.
    if (tokenizer_detail::decode_utf8(p, end) == 0xFFFD && p - start == 1) return false;
  }
  return true;
}

PredictRequest decode_predict_request(std::string_view body, int max_client_batch_size,
                                      InputShape shape) {
  const json j = parse_body(body);
  PredictRequest r;
  auto inputs = j.find("inputs");
  if (inputs == j.end()) bad_request("missing field `inputs`");
  if (inputs->is_string()) {
    r.inputs.push_back({inputs->get<std::string>(), std::nullopt, std::nullopt});
  } else if (inputs->is_array()) {
    const json& list = *inputs;
    if (shape == InputShape::kTextsOrPairs && list.size() == 2 && list[0].is_string() &&
        list[1].is_string()) {
      r.inputs.push_back({list[0].get<std::string>(), list[1].get<std::string>(), std::nullopt});
    } else {
      check_batch_size(list.size(), max_client_batch_size);
      r.batch = true;
      r.inputs.reserve(list.size());
      for (std::size_t i = 0; i < list.size(); ++i) {
        r.inputs.push_back(sequence(list[i], i));
        if (shape == InputShape::kTexts && r.inputs.back().b) {
          throw ApiError(422, "validation",
                         cat("Input validation error: `inputs[", i,
                             "]` is a pair of texts; this model tags one text per input"));
        }
      }
    }
  } else {
    bad_request("`inputs` must be a text, a pair of texts or a list of them");
  }
  r.truncate = optional_bool(j, "truncate");
  r.raw_scores = optional_bool(j, "raw_scores").value_or(false);
  r.aggregation_strategy = optional_string(j, "aggregation_strategy");
  auto parameters = j.find("parameters");
  if (parameters != j.end() && !parameters->is_null()) {
    if (!parameters->is_object()) bad_request("`parameters` must be an object");
    std::optional<std::string> in_parameters = optional_string(*parameters, "aggregation_strategy");
    if (in_parameters && r.aggregation_strategy) {
      bad_request("`aggregation_strategy` is given twice (at the top and in `parameters`)");
    }
    if (in_parameters) r.aggregation_strategy = in_parameters;
  }
  r.direction = direction_of(j);
  return r;
}

EmbedRequest decode_embed_request(std::string_view body, int max_client_batch_size) {
  const json j = parse_body(body);
  EmbedRequest r;
  r.inputs = embed_inputs_at(j, "inputs", max_client_batch_size);
  r.normalize = optional_bool(j, "normalize").value_or(true);
  r.truncate = optional_bool(j, "truncate");
  r.direction = direction_of(j);
  r.prompt_name = optional_string(j, "prompt_name");
  r.dimensions = optional_dimensions(j);
  return r;
}

EmbedAllRequest decode_embed_all_request(std::string_view body, int max_client_batch_size) {
  const json j = parse_body(body);
  EmbedAllRequest r;
  r.inputs = embed_inputs_at(j, "inputs", max_client_batch_size);
  r.truncate = optional_bool(j, "truncate");
  r.direction = direction_of(j);
  r.prompt_name = optional_string(j, "prompt_name");
  return r;
}

SimilarityRequest decode_similarity_request(std::string_view body, int max_client_batch_size) {
  const json j = parse_body(body);
  SimilarityRequest r;
  auto inputs = j.find("inputs");
  if (inputs == j.end()) bad_request("missing field `inputs`");
  if (!inputs->is_object()) {
    bad_request("`inputs` must be {\"source_sentence\": text, \"sentences\": [text, ...]}");
  }
  auto source = inputs->find("source_sentence");
  if (source == inputs->end() || !source->is_string()) {
    bad_request("`inputs.source_sentence` must be a text");
  }
  r.source = source->get<std::string>();
  auto sentences = inputs->find("sentences");
  if (sentences == inputs->end() || !sentences->is_array()) {
    bad_request("`inputs.sentences` must be a list of texts");
  }
  if (sentences->empty()) throw ApiError(400, "empty", "`inputs.sentences` cannot be empty");
  // The source sentence is embedded with them: it counts in the batch.
  check_batch_size(sentences->size() + 1, max_client_batch_size, "inputs.sentences");
  for (const json& s : *sentences) {
    if (!s.is_string()) bad_request("`inputs.sentences` must be a list of texts");
    r.sentences.push_back(s.get<std::string>());
  }
  auto parameters = j.find("parameters");
  if (parameters != j.end() && !parameters->is_null()) {
    if (!parameters->is_object()) bad_request("`parameters` must be an object");
    r.truncate = optional_bool(*parameters, "truncate");
    r.direction = direction_of(*parameters);
    r.prompt_name = optional_string(*parameters, "prompt_name");
  }
  return r;
}

DecodeRequest decode_decode_request(std::string_view body, int max_client_batch_size) {
  const json j = parse_body(body);
  DecodeRequest r;
  auto ids = j.find("ids");
  if (ids == j.end()) bad_request("missing field `ids`");
  if (!ids->is_array()) {
    bad_request("`ids` must be a list of token ids or a list of such lists");
  }
  // As TEI's untagged InputIds: a list of ids first (so [] is one empty list), then a batch.
  if (ids->empty() || !ids->front().is_array()) {
    r.ids.push_back(id_list(*ids, "ids"));
  } else {
    check_batch_size(ids->size(), max_client_batch_size, "ids");
    for (const json& list : *ids) {
      if (!list.is_array()) {
        bad_request("`ids` must be a list of token ids or a list of such lists");
      }
      r.ids.push_back(id_list(list, "ids"));
    }
  }
  r.skip_special_tokens = optional_bool(j, "skip_special_tokens").value_or(true);
  return r;
}

OpenAiEmbedRequest decode_openai_embed_request(std::string_view body, int max_client_batch_size) {
  const json j = parse_body(body);
  OpenAiEmbedRequest r;
  r.inputs = embed_inputs_at(j, "input", max_client_batch_size);
  r.model = optional_string(j, "model").value_or("");
  const std::string format = optional_string(j, "encoding_format").value_or("float");
  if (format != "float" && format != "base64") {
    bad_request("`encoding_format` must be \"float\" or \"base64\"");
  }
  r.base64 = format == "base64";
  r.dimensions = optional_dimensions(j);
  return r;
}

RerankRequest decode_rerank_request(std::string_view body, int max_client_batch_size) {
  const json j = parse_body(body);
  RerankRequest r;
  auto query = j.find("query");
  if (query == j.end() || !query->is_string()) bad_request("`query` must be a text");
  r.query = query->get<std::string>();
  auto texts = j.find("texts");
  if (texts == j.end() || !texts->is_array()) bad_request("`texts` must be a list of texts");
  r.texts = texts_at(j, "texts", max_client_batch_size);
  r.truncate = optional_bool(j, "truncate");
  r.direction = direction_of(j);
  r.raw_scores = optional_bool(j, "raw_scores").value_or(false);
  r.return_text = optional_bool(j, "return_text").value_or(false);
  return r;
}

TokenizeRequest decode_tokenize_request(std::string_view body, int max_client_batch_size) {
  const json j = parse_body(body);
  TokenizeRequest r;
  r.inputs = texts_at(j, "inputs", max_client_batch_size);
  r.add_special_tokens = optional_bool(j, "add_special_tokens").value_or(true);
  return r;
}

namespace {

// encode_input after tokenization: a's tokens (and offsets), b's if any.
Encoding encode_tokens(const Tokenizer& tokenizer, std::vector<std::int32_t> a,
                       std::vector<TokenOffset> a_offsets,
                       std::optional<std::vector<std::int32_t>> b,
                       std::vector<TokenOffset> b_offsets, bool truncate,
                       TruncationDirection direction, int max_len, bool with_offsets) {
  const auto specials = static_cast<std::size_t>(tokenizer.num_special_tokens(b.has_value()));
  const std::size_t total = a.size() + (b ? b->size() : 0) + specials;
  if (total > static_cast<std::size_t>(max_len)) {
    if (!truncate) {
      throw ApiError(422, "validation",
                     cat("Input validation error: `inputs` must have less than ", max_len,
                         " tokens. Given: ", total));
    }
    // longest_first as the tokenizer cuts a pair (its slow or its fast library's rule).
    const auto [keep_a, keep_b] = tokenizer.kept_lengths(
        a.size(), b ? b->size() : 0, b.has_value(), static_cast<std::size_t>(max_len) - specials);
    auto cut = [direction](auto& items, std::size_t keep) {
      if (items.size() <= keep) return;  // also offsets not asked for (empty)
      if (direction == TruncationDirection::kRight) {
        items.resize(keep);
      } else {
        items.erase(items.begin(), items.end() - static_cast<std::ptrdiff_t>(keep));
      }
    };
    cut(a, keep_a);
    cut(a_offsets, keep_a);
    if (b) {
      cut(*b, keep_b);
      cut(b_offsets, keep_b);
    }
  }
  if (!with_offsets) return tokenizer.encode_ids(std::move(a), std::move(b), max_len);
  return tokenizer.encode_ids(std::move(a), std::move(b), max_len, &a_offsets,
                              b ? &b_offsets : nullptr);
}

// The client's token ids as the model's input, checked and cut as encode_tokens does.
Encoding encode_token_ids(const Tokenizer& tokenizer, const std::vector<std::int64_t>& ids,
                          bool truncate, TruncationDirection direction, int max_len) {
  if (ids.empty()) throw ApiError(400, "empty", "`inputs` cannot be empty");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= tokenizer.vocab_size()) {
      throw ApiError(
          422, "validation",
          cat("Input validation error: token id ", ids[i], " at position ", i,
              " is not in the model's vocabulary (ids 0 to ", tokenizer.vocab_size() - 1, ")"));
    }
  }
  const std::size_t keep = std::min(ids.size(), static_cast<std::size_t>(max_len));
  if (keep < ids.size() && !truncate) {
    throw ApiError(422, "validation",
                   cat("Input validation error: `inputs` must have less than ", max_len,
                       " tokens. Given: ", ids.size()));
  }
  Encoding e;
  const auto first = direction == TruncationDirection::kRight
                         ? ids.begin()
                         : ids.end() - static_cast<std::ptrdiff_t>(keep);
  for (auto it = first; it != first + static_cast<std::ptrdiff_t>(keep); ++it) {
    e.input_ids.push_back(static_cast<std::int32_t>(*it));
  }
  e.token_type_ids.assign(keep, 0);
  e.attention_mask.assign(keep, 1);
  e.truncated_tokens = static_cast<std::int64_t>(ids.size() - keep);
  return e;
}

}  // namespace

Encoding encode_input(const Tokenizer& tokenizer, const TextInput& input, bool truncate,
                      TruncationDirection direction, int max_len, bool with_offsets) {
  if (input.ids) return encode_token_ids(tokenizer, *input.ids, truncate, direction, max_len);
  std::vector<std::int32_t> a;
  std::vector<TokenOffset> a_offsets, b_offsets;
  std::string a_lowered, b_lowered;  // a lowercasing model's texts (Tokenizer::input_text)
  tokenizer.tokenize_into(tokenizer.input_text(input.a, a_lowered), a,
                          with_offsets ? &a_offsets : nullptr);
  std::optional<std::vector<std::int32_t>> b;
  if (input.b) {
    b.emplace();
    tokenizer.tokenize_into(tokenizer.input_text(*input.b, b_lowered), *b,
                            with_offsets ? &b_offsets : nullptr);
  }
  return encode_tokens(tokenizer, std::move(a), std::move(a_offsets), std::move(b),
                       std::move(b_offsets), truncate, direction, max_len, with_offsets);
}

Encoding encode_pair(const Tokenizer& tokenizer, const std::vector<std::int32_t>& a,
                     const std::string& b, bool truncate, TruncationDirection direction,
                     int max_len) {
  std::vector<std::int32_t> b_ids;
  std::string lowered;
  tokenizer.tokenize_into(tokenizer.input_text(b, lowered), b_ids, nullptr);
  return encode_tokens(tokenizer, a, {}, std::move(b_ids), {}, truncate, direction, max_len,
                       /*with_offsets=*/false);
}

}  // namespace bertfit::serve
