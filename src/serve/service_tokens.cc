// The tokenizer routes of bertfit serve (see service.h): /tokenize (the model's tokens with
// character offsets) and /decode (Tokenizer::decode of each id list), answered at once on the
// connection threads, bounded by max_batch_tokens tokens a request.
#include <nlohmann/json.hpp>
#include <utility>

#include "base/error.h"
#include "serve/service.h"

namespace bertfit::serve {

using nlohmann::json;

// Tokenizes every input first and refuses the request past max_batch_tokens tokens (what one
// batch of the model takes), then writes the answer straight into its string.
HttpResponse Service::tokenize(const HttpRequest& req) {
  const std::shared_ptr<void> place = take_place();
  TokenizeRequest request = decode_tokenize_request(req.body, options_.max_client_batch_size);
  const std::int64_t cap = options_.limits.max_batch_tokens;
  const std::int64_t specials = request.add_special_tokens ? 2 : 0;
  std::vector<std::vector<std::int32_t>> all;
  std::vector<std::vector<TokenOffset>> spans;  // character offsets of each token
  std::int64_t total = 0;
  for (const std::string& text : request.inputs) {
    all.emplace_back();
    std::vector<TokenOffset> bytes;
    std::string lowered;  // a lowercasing model's text (Tokenizer::input_text)
    const std::string_view input = tokenizer_.input_text(text, lowered);
    tokenizer_.tokenize_into(input, all.back(), &bytes);
    spans.push_back(byte_to_char_offsets(input, bytes));
    total += static_cast<std::int64_t>(all.back().size()) + specials;
    if (total > cap) {
      throw ApiError(413, "validation",
                     cat("the inputs have over ", cap,
                         " tokens (--max-batch-tokens); send fewer or shorter texts"),
                     "tokenize_limit");
    }
  }
  std::string out = "[";
  // start/stop: the token's characters [start, stop) in its input (code points, as Hugging
  // Face's fast tokenizers count them); null for the special tokens added around it.
  auto add = [&](std::int32_t id, bool special, bool first, const TokenOffset* span) {
    out += first ? "{\"id\":" : ",{\"id\":";
    out += std::to_string(id);
    out += ",\"text\":";
    out += json(tokenizer_.token(id)).dump(-1, ' ', false, json::error_handler_t::replace);
    out += special ? ",\"special\":true" : ",\"special\":false";
    if (span == nullptr) {
      out += ",\"start\":null,\"stop\":null}";
    } else {
      out += ",\"start\":" + std::to_string(span->begin) +
             ",\"stop\":" + std::to_string(span->end) + "}";
    }
  };
  for (std::size_t i = 0; i < all.size(); ++i) {
    out += i > 0 ? ",[" : "[";
    bool first = true;
    if (request.add_special_tokens) {
      add(tokenizer_.cls_id(), true, std::exchange(first, false), nullptr);
    }
    for (std::size_t t = 0; t < all[i].size(); ++t) {
      add(all[i][t], false, std::exchange(first, false), &spans[i][t]);
    }
    if (request.add_special_tokens) {
      add(tokenizer_.sep_id(), true, std::exchange(first, false), nullptr);
    }
    out += ']';
  }
  out += ']';
  HttpResponse r;
  r.body = std::move(out);
  return r;
}

HttpResponse Service::decode(const HttpRequest& req) {
  const std::shared_ptr<void> place = take_place();
  DecodeRequest request = decode_decode_request(req.body, options_.max_client_batch_size);
  const std::int64_t cap = options_.limits.max_batch_tokens;
  std::int64_t total = 0;
  for (const auto& ids : request.ids) total += static_cast<std::int64_t>(ids.size());
  if (total > cap) {
    throw ApiError(
        413, "validation",
        cat("the ids are over ", cap, " tokens (--max-batch-tokens); send fewer or shorter lists"),
        "decode_limit");
  }
  std::vector<std::string> texts;
  std::vector<std::int32_t> ids;
  for (const auto& list : request.ids) {
    ids.clear();
    for (const std::int64_t id : list) {
      if (id > tokenizer_.max_id()) {
        throw ApiError(
            422, "tokenizer",
            cat("token id ", id, " is outside the vocabulary (0..", tokenizer_.max_id(), ")"));
      }
      ids.push_back(static_cast<std::int32_t>(id));
    }
    texts.push_back(tokenizer_.decode(ids, request.skip_special_tokens));
  }
  HttpResponse r;
  // TEI's answer: always a list, one text per id list.
  r.body = json(texts).dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

}  // namespace bertfit::serve
