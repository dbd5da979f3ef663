// The embedding routes of bertfit serve (see service.h): /embed, /embed_all, /similarity and
// /v1/embeddings, all on the outputs of one queue submission (Service::submit): the pooling
// head's vectors, or for /embed_all the last layer's token rows.
#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/transform_width.hpp>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/error.h"
#include "model/head.h"
#include "serve/service.h"

namespace bertfit::serve {
namespace {

using nlohmann::json;

// Base64 (RFC 4648, with padding) of a vector's little-endian float32 bytes, as OpenAI's
// encoding_format "base64" sends it.
std::string base64_of(const std::vector<float>& v) {
  using namespace boost::archive::iterators;
  using Encode = base64_from_binary<transform_width<const unsigned char*, 6, 8>>;
  const auto* bytes = reinterpret_cast<const unsigned char*>(v.data());
  const std::size_t n = v.size() * sizeof(float);
  std::string out(Encode(bytes), Encode(bytes + n));
  out.append((3 - n % 3) % 3, '=');
  return out;
}

// The most bytes append_floats writes per number: the shortest float32 text that reads back
// the same ("-1.17549435e-38" is 15) and a comma.
constexpr std::size_t kNumberBytes = 16;

// The values as a JSON list's items, each the shortest float32 text that reads back the same
// (as TEI's serde_json writes an f32), comma-separated; a non-finite value is null (as
// nlohmann::json writes it).
void append_floats(std::string& out, const float* values, std::size_t n) {
  char buf[32];
  for (std::size_t k = 0; k < n; ++k) {
    if (k > 0) out += ',';
    if (!std::isfinite(values[k])) {
      out += "null";
      continue;
    }
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, values[k]);
    out.append(buf, end);
  }
}

}  // namespace

std::string Service::prompt_of(const std::optional<std::string>& prompt_name) const {
  const std::string name = prompt_name.value_or(options_.default_prompt_name);
  if (name.empty()) return "";
  const auto it = options_.prompts.find(name);
  if (it == options_.prompts.end()) {
    throw ApiError(422, "validation",
                   cat("Input validation error: `prompt_name` \"", name,
                       "\" is not one of the model's prompts (config_sentence_transformers.json)"));
  }
  return it->second;
}

TextInput Service::with_prompt(TextInput input, const std::string& prompt) const {
  if (prompt.empty()) return input;
  if (input.ids) {
    std::vector<std::int32_t> ids;
    for (std::int64_t id : *input.ids) {
      if (id >= tokenizer_.vocab_size()) {
        throw ApiError(
            422, "validation",
            cat("Input validation error: token id ", id,
                " is not in the model's vocabulary (ids 0 to ", tokenizer_.vocab_size() - 1, ")"));
      }
      ids.push_back(static_cast<std::int32_t>(id));
    }
    input.a = tokenizer_.decode(ids, /*skip_special_tokens=*/true);
    input.ids.reset();
  }
  input.a = prompt + input.a;
  return input;
}

void Service::embed(const HttpRequest& req, Respond respond) {
  require_embedder("/embed");
  EmbedRequest request = decode_embed_request(req.body, options_.max_client_batch_size);
  embed_texts(req, std::move(respond), std::move(request.inputs), prompt_of(request.prompt_name),
              request.normalize, request.dimensions, request.truncate, request.direction,
              [](std::vector<std::vector<float>> vectors, std::int64_t /*tokens*/) {
                // TEI's answer: a list of vectors, one per input.
                return json(std::move(vectors)).dump();
              });
}

void Service::openai_embed(const HttpRequest& req, Respond respond) {
  require_embedder(req.target.substr(0, req.target.find('?')).c_str());  // or /embeddings
  OpenAiEmbedRequest request =
      decode_openai_embed_request(req.body, options_.max_client_batch_size);
  // As TEI: the answer names the served model whatever the request's `model` says.
  const std::string model = served_model_name();
  const bool base64 = request.base64;
  embed_texts(
      req, std::move(respond), std::move(request.inputs), "", /*normalize=*/true,
      request.dimensions, std::nullopt, TruncationDirection::kRight,
      [model, base64](std::vector<std::vector<float>> vectors, std::int64_t tokens) {
        json data = json::array();
        for (std::size_t i = 0; i < vectors.size(); ++i) {
          json vector = base64 ? json(base64_of(vectors[i])) : json(std::move(vectors[i]));
          data.push_back({{"object", "embedding"}, {"embedding", std::move(vector)}, {"index", i}});
        }
        return json{{"object", "list"},
                    {"data", std::move(data)},
                    {"model", model},
                    {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}
            .dump(-1, ' ', false, json::error_handler_t::replace);
      });
}

void Service::embed_all(const HttpRequest& req, Respond respond) {
  require_embedder("/embed_all");
  auto place = take_place();
  EmbedAllRequest request = decode_embed_all_request(req.body, options_.max_client_batch_size);
  const std::string prompt = prompt_of(request.prompt_name);
  std::vector<TextInput> inputs;
  for (TextInput& input : request.inputs) inputs.push_back(with_prompt(std::move(input), prompt));
  // The answer's size is known once the inputs are tokenized: every token's row of C numbers,
  // each at most kNumberBytes with its comma, a row's brackets and comma, an input's too.
  const auto C = static_cast<std::size_t>(config_.hidden);
  auto bound = [C](const std::vector<Encoding>& encoded) {
    std::size_t bytes = 2;
    for (const Encoding& e : encoded) bytes += 3 + e.input_ids.size() * (3 + C * kNumberBytes);
    return bytes;
  };
  submit(
      req, std::move(place), inputs, request.truncate.value_or(options_.auto_truncate),
      request.direction, /*with_offsets=*/false, Output::kTokens, std::move(respond),
      [](const Job& done) {
        // TEI's answer: per input, per token (all of them, the special ones too), its vector.
        std::string out = "[";
        for (std::size_t i = 0; i < done.inputs.size(); ++i) {
          out += i > 0 ? ",[" : "[";
          for (std::size_t r = done.row_start[i]; r < done.row_start[i + 1]; ++r) {
            out += r > done.row_start[i] ? ",[" : "[";
            append_floats(out, done.logits.data() + r * done.width, done.width);
            out += ']';
          }
          out += ']';
        }
        out += ']';
        return out;
      },
      bound);
}

void Service::similarity(const HttpRequest& req, Respond respond) {
  require_embedder("/similarity");
  SimilarityRequest request = decode_similarity_request(req.body, options_.max_client_batch_size);
  std::vector<TextInput> texts;
  texts.push_back({std::move(request.source), std::nullopt, std::nullopt});
  for (std::string& s : request.sentences)
    texts.push_back({std::move(s), std::nullopt, std::nullopt});
  // /embed's vectors (as TEI, not normalized again: the cosine does not depend on the norms).
  embed_texts(req, std::move(respond), std::move(texts), prompt_of(request.prompt_name),
              /*normalize=*/false, std::nullopt, request.truncate, request.direction,
              [](std::vector<std::vector<float>> vectors, std::int64_t /*tokens*/) {
                // TEI's answer: cos(source, sentence) per sentence, in order.
                const std::vector<float>& a = vectors[0];
                std::vector<float> cosines;
                for (std::size_t i = 1; i < vectors.size(); ++i) {
                  const std::vector<float>& b = vectors[i];
                  double ab = 0, aa = 0, bb = 0;
                  for (std::size_t k = 0; k < a.size(); ++k) {
                    ab += double{a[k]} * b[k];
                    aa += double{a[k]} * a[k];
                    bb += double{b[k]} * b[k];
                  }
                  // A zero vector is similar to nothing.
                  const double denominator = std::sqrt(aa) * std::sqrt(bb);
                  cosines.push_back(denominator > 0 ? static_cast<float>(ab / denominator) : 0.0f);
                }
                return json(cosines).dump();
              });
}

void Service::embed_texts(const HttpRequest& req, Respond respond, std::vector<TextInput> texts,
                          const std::string& prompt, bool normalize, std::optional<int> dimensions,
                          std::optional<bool> truncate, TruncationDirection direction,
                          EmbedAnswer answer) {
  auto place = take_place();
  const int D = model_head(config_).output_width(config_);
  if (dimensions && (*dimensions < 1 || *dimensions > D)) {
    throw ApiError(
        422, "validation",
        cat("Input validation error: `dimensions` must be in [1, ", D, "], got ", *dimensions));
  }
  const int dims = dimensions.value_or(D);
  std::vector<TextInput> inputs;
  for (TextInput& input : texts) inputs.push_back(with_prompt(std::move(input), prompt));
  submit(req, std::move(place), inputs, truncate.value_or(options_.auto_truncate), direction,
         /*with_offsets=*/false, Output::kHead, std::move(respond),
         [D, dims, normalize, answer = std::move(answer)](const Job& done) {
           // The first `dims` values of each vector, L2-normalized when asked (a model with a
           // Normalize module is normalized already, before the cut).
           std::vector<std::vector<float>> vectors;
           std::int64_t tokens = 0;
           for (std::size_t i = 0; i < done.inputs.size(); ++i) {
             const float* v = done.logits.data() + done.row_start[i] * D;
             std::vector<float> out(v, v + dims);
             if (normalize) {
               const float n = l2_norm(out.data(), dims);
               for (float& x : out) x /= n;
             }
             vectors.push_back(std::move(out));
             tokens += static_cast<std::int64_t>(done.inputs[i].input_ids.size());
           }
           return answer(std::move(vectors), tokens);
         });
}

}  // namespace bertfit::serve
