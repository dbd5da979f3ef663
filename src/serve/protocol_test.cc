// Request decoding and input encoding of bertfit serve: TEI's input shapes, every refusal with
// its status, and truncation in both directions against the tokenizer's own (right) truncation.
#include "serve/protocol.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/wordpiece.h"

namespace bertfit::serve {
namespace {

const std::string kVocab = std::string(BERTFIT_SHARED_DIR) + "/data/vocab/bert-base-uncased.txt";

const WordPieceTokenizer& tokenizer() {
  static const WordPieceTokenizer tok = WordPieceTokenizer::from_vocab_file(kVocab);
  return tok;
}

int status_of(const std::string& body) {
  try {
    decode_predict_request(body, 4);
  } catch (const ApiError& e) {
    return e.status();
  }
  return 200;
}

TEST(ServeProtocol, InputShapes) {
  PredictRequest r = decode_predict_request(R"({"inputs": "hello"})", 32);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_FALSE(r.batch);
  EXPECT_EQ(r.inputs[0].a, "hello");
  EXPECT_FALSE(r.inputs[0].b);
  EXPECT_FALSE(r.truncate);
  // Two texts are one pair.
  r = decode_predict_request(R"({"inputs": ["a", "b"], "raw_scores": true})", 32);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_FALSE(r.batch);
  EXPECT_EQ(*r.inputs[0].b, "b");
  EXPECT_TRUE(r.raw_scores);
  // A list of sequences is a batch.
  r = decode_predict_request(
      R"({"inputs": [["a"], ["b", "c"], "d"], "truncate": true, "truncation_direction": "left"})",
      32);
  ASSERT_EQ(r.inputs.size(), 3u);
  EXPECT_TRUE(r.batch);
  EXPECT_FALSE(r.inputs[0].b);
  EXPECT_EQ(*r.inputs[1].b, "c");
  EXPECT_EQ(r.inputs[2].a, "d");
  EXPECT_EQ(*r.truncate, true);
  EXPECT_EQ(r.direction, TruncationDirection::kLeft);
  // One text in a list, or three, are batches too.
  EXPECT_TRUE(decode_predict_request(R"({"inputs": ["a"]})", 32).batch);
  EXPECT_EQ(decode_predict_request(R"({"inputs": ["a", "b", "c"]})", 32).inputs.size(), 3u);
}

TEST(ServeProtocol, Refusals) {
  EXPECT_EQ(status_of(R"({"inputs": "ok"})"), 200);
  EXPECT_EQ(status_of("{\"inputs\": "), 400);                     // not JSON
  EXPECT_EQ(status_of("[1]"), 400);                               // not an object
  EXPECT_EQ(status_of(R"({"input": "x"})"), 400);                 // no inputs
  EXPECT_EQ(status_of(R"({"inputs": 3})"), 400);                  // wrong type
  EXPECT_EQ(status_of(R"({"inputs": [["a", "b", "c"]]})"), 400);  // a triple
  EXPECT_EQ(status_of(R"({"inputs": [[]]})"), 400);               // nothing
  EXPECT_EQ(status_of(R"({"inputs": [1, 2]})"), 400);             // numbers
  EXPECT_EQ(status_of(R"({"inputs": "a", "truncate": "yes"})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": "a", "truncation_direction": "up"})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": []})"), 400);                         // empty batch
  EXPECT_EQ(status_of(R"({"inputs": ["a", "b", "c", "d", "e"]})"), 413);  // over 4
  EXPECT_EQ(status_of("{\"inputs\": \"\xff\"}"), 422);                    // not UTF-8
  EXPECT_EQ(status_of("{\"inputs\": \"\xed\xa0\x80\"}"), 422);            // a surrogate
  try {
    decode_predict_request(R"({"inputs": []})", 4);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.type(), "empty");
    auto j = nlohmann::json::parse(error_body(e.type(), e.what()));
    EXPECT_EQ(j["error_type"], "empty");
    EXPECT_FALSE(j["error"].get<std::string>().empty());
  }
}

// JSON that nlohmann alone would take but that another parser reads otherwise: bytes after a NUL
// (nlohmann's end of input), a NUL inside a string, a key twice in any object (first or last
// wins).
TEST(ServeProtocol, AmbiguousBodiesAreRefused) {
  using namespace std::string_literals;
  EXPECT_EQ(status_of("{\"inputs\":\"ab\"}\0garbage{{"s), 400);
  EXPECT_EQ(status_of("{\"inputs\":\"ab\"}\0"s), 400);
  EXPECT_EQ(status_of("{\"inputs\":\"a\0b\"}"s), 400);
  EXPECT_EQ(status_of(R"({"inputs": "ab"} {"inputs": "cd"})"), 400);  // a second value
  EXPECT_EQ(status_of(R"({"inputs": "ab"} x)"), 400);
  EXPECT_EQ(status_of(R"({"inputs": "ab", "inputs": ["c", "d"]})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": "ab", "truncate": true, "truncate": false})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": "ab", "parameters": {"k": 1, "k": 2}})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": "ab", "x": [{"y": {"k": 1, "k": 2}}]})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": "ab", "a": {"k": 1}, "b": {"k": 2}})"), 200);
  // Nested objects may repeat a top-level key's name; an escaped NUL is a character like any.
  EXPECT_EQ(status_of(R"({"inputs": "ab", "meta": {"inputs": 1}})"), 200);
  EXPECT_EQ(status_of(R"({"inputs": "a\u0000b"})"), 200);
  EXPECT_EQ(status_of(" {\"inputs\": \"ab\"}\r\n"), 200);  // white space around the value
  try {
    decode_tokenize_request("{\"inputs\":\"ab\"}\0x"s, 4);
    ADD_FAILURE() << "a NUL byte was accepted by /tokenize";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
  }
}

TEST(ServeProtocol, Utf8) {
  EXPECT_TRUE(valid_utf8("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd"));
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(valid_utf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
}

TEST(ServeProtocol, TruncationBothWays) {
  const WordPieceTokenizer& tok = tokenizer();
  const TextInput pair{"one two three four five six", std::string("seven eight nine"),
                       std::nullopt};
  // Right: exactly what the tokenizer's own encode (and `bertfit predict`) gives.
  Encoding right = encode_input(tok, pair, true, TruncationDirection::kRight, 8);
  EXPECT_EQ(right.input_ids, tok.encode(pair.a, *pair.b, 8).input_ids);
  // Left: the same counts (longest first: a keeps 3, b 2), cut at the start of each text.
  Encoding left = encode_input(tok, pair, true, TruncationDirection::kLeft, 8);
  Encoding want = tok.encode("four five six", std::string("eight nine"), 100);
  EXPECT_EQ(left.input_ids, want.input_ids);
  EXPECT_EQ(left.token_type_ids, want.token_type_ids);
  // Without truncation: 422.
  try {
    encode_input(tok, pair, false, TruncationDirection::kRight, 8);
    ADD_FAILURE() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 422);
  }
  // Short inputs are untouched either way.
  EXPECT_EQ(encode_input(tok, {"hi", std::nullopt}, false, TruncationDirection::kLeft, 8).input_ids,
            tok.encode("hi", std::nullopt, 8).input_ids);
}

TEST(ServeProtocol, Tokenize) {
  TokenizeRequest r =
      decode_tokenize_request(R"({"inputs": ["a", "b"], "add_special_tokens": false})", 4);
  EXPECT_EQ(r.inputs.size(), 2u);
  EXPECT_FALSE(r.add_special_tokens);
  EXPECT_EQ(decode_tokenize_request(R"({"inputs": "a"})", 4).inputs.size(), 1u);
  EXPECT_THROW(decode_tokenize_request(R"({"inputs": [["a"]]})", 4), ApiError);
}

// A token classifier's requests (InputShape::kTexts): every list is a batch of texts, a pair in
// it is refused; aggregation_strategy at the top or in `parameters`, not both.
TEST(ServeProtocol, TextsOnlyAndAggregationStrategy) {
  const InputShape texts = InputShape::kTexts;
  PredictRequest r = decode_predict_request(R"({"inputs": ["a", "b"]})", 32, texts);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_TRUE(r.batch);
  EXPECT_FALSE(r.inputs[0].b);
  EXPECT_FALSE(r.aggregation_strategy);
  r = decode_predict_request(R"({"inputs": [["a"], "b", ["c"]]})", 32, texts);
  EXPECT_EQ(r.inputs.size(), 3u);
  try {
    decode_predict_request(R"({"inputs": ["a", ["b", "c"]]})", 32, texts);
    ADD_FAILURE() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 422);
    EXPECT_NE(std::string(e.what()).find("`inputs[1]` is a pair"), std::string::npos) << e.what();
  }
  r = decode_predict_request(R"({"inputs": "a", "aggregation_strategy": "max"})", 32, texts);
  EXPECT_EQ(r.aggregation_strategy, "max");
  r = decode_predict_request(R"({"inputs": "a", "parameters": {"aggregation_strategy": "none"}})",
                             32, texts);
  EXPECT_EQ(r.aggregation_strategy, "none");
  r = decode_predict_request(R"({"inputs": "a", "parameters": null, "aggregation_strategy": null})",
                             32, texts);
  EXPECT_FALSE(r.aggregation_strategy);
  for (
      const char* bad :
      {R"({"inputs": "a", "aggregation_strategy": "max", "parameters": {"aggregation_strategy": "max"}})",
       R"({"inputs": "a", "parameters": []})", R"({"inputs": "a", "aggregation_strategy": 2})",
       R"({"inputs": "a", "parameters": {"aggregation_strategy": true}})"}) {
    EXPECT_THROW(decode_predict_request(bad, 32, texts), ApiError) << bad;
  }
  // TEI's shapes are unchanged: two texts are one pair.
  EXPECT_TRUE(decode_predict_request(R"({"inputs": ["a", "b"]})", 32).inputs[0].b);
}

// With offsets, each kept token keeps its bytes in its own text, cut with the ids either way.
TEST(ServeProtocol, OffsetsFollowTruncation) {
  const WordPieceTokenizer& tok = tokenizer();
  const TextInput text{"one two three four five", std::nullopt, std::nullopt};
  const Encoding full = tok.encode(text.a, std::nullopt, 100, /*with_offsets=*/true);
  ASSERT_EQ(full.offsets.size(), 7u);
  Encoding untouched = encode_input(tok, text, false, TruncationDirection::kRight, 100, true);
  EXPECT_EQ(untouched.input_ids, full.input_ids);
  EXPECT_EQ(untouched.offsets, full.offsets);
  Encoding right = encode_input(tok, text, true, TruncationDirection::kRight, 5, true);
  const Encoding want_right = tok.encode(text.a, std::nullopt, 5, true);
  EXPECT_EQ(right.input_ids, want_right.input_ids);
  EXPECT_EQ(right.offsets, want_right.offsets);
  Encoding left = encode_input(tok, text, true, TruncationDirection::kLeft, 5, true);
  ASSERT_EQ(left.offsets.size(), 5u);
  // [CLS] three four five [SEP]: "three" starts at byte 8 of the text.
  EXPECT_EQ(left.offsets[1].begin, 8u);
  EXPECT_EQ(left.offsets[3].end, 23u);
  EXPECT_EQ(left.offsets[0].begin, left.offsets[0].end);
  EXPECT_EQ(left.offsets[4].begin, left.offsets[4].end);
  // A pair keeps both texts' offsets.
  Encoding pair = encode_input(tok, {"one two", std::string("three")}, true,
                               TruncationDirection::kLeft, 5, true);
  EXPECT_EQ(pair.offsets.size(), pair.input_ids.size());
}

// /embed_all, /similarity (options under "parameters", the source counted in the batch) and
// /decode (a list of ids or of lists; [] is one empty list) as TEI's types read them.
TEST(ServeProtocol, EmbedAllSimilarityDecode) {
  EmbedAllRequest e = decode_embed_all_request(
      R"({"inputs": ["a", "b"], "truncate": true, "truncation_direction": "left",
          "prompt_name": "q"})",
      32);
  ASSERT_EQ(e.inputs.size(), 2u);
  EXPECT_EQ(e.inputs[0].a, "a");
  EXPECT_EQ(e.inputs[1].a, "b");
  EXPECT_FALSE(e.inputs[0].ids);
  EXPECT_EQ(e.truncate, true);
  EXPECT_EQ(e.direction, TruncationDirection::kLeft);
  EXPECT_EQ(e.prompt_name, "q");
  EXPECT_EQ(decode_embed_all_request(R"({"inputs": "a"})", 32).inputs.size(), 1u);

  SimilarityRequest s = decode_similarity_request(
      R"({"inputs": {"source_sentence": "s", "sentences": ["a", "b"]},
          "parameters": {"truncate": false, "prompt_name": "q"}})",
      3);
  EXPECT_EQ(s.source, "s");
  EXPECT_EQ(s.sentences, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.truncate, false);
  EXPECT_EQ(s.prompt_name, "q");
  // Top-level options are not TEI's: ignored, as unknown keys.
  s = decode_similarity_request(
      R"({"inputs": {"source_sentence": "s", "sentences": ["a"]}, "truncate": true})", 3);
  EXPECT_FALSE(s.truncate.has_value());
  auto status = [](auto decode, const char* body) {
    try {
      decode(body);
    } catch (const ApiError& e) {
      return e.status();
    }
    return 200;
  };
  auto similarity = [](const char* body) { decode_similarity_request(body, 3); };
  EXPECT_EQ(status(similarity, R"({"inputs": {"source_sentence": "s", "sentences": ["a", "b",
            "c"]}})"),
            413);
  EXPECT_EQ(status(similarity, R"({"inputs": {"source_sentence": "s", "sentences": []}})"), 400);
  EXPECT_EQ(status(similarity, R"({"inputs": {"source_sentence": 1, "sentences": ["a"]}})"), 400);
  EXPECT_EQ(status(similarity, R"({"inputs": ["s", "a"]})"), 400);

  DecodeRequest d = decode_decode_request(R"({"ids": [101, 4294967295]})", 2);
  ASSERT_EQ(d.ids.size(), 1u);
  EXPECT_EQ(d.ids[0], (std::vector<std::int64_t>{101, 4294967295}));
  EXPECT_TRUE(d.skip_special_tokens);
  d = decode_decode_request(R"({"ids": [[1], []], "skip_special_tokens": false})", 2);
  EXPECT_EQ(d.ids.size(), 2u);
  EXPECT_FALSE(d.skip_special_tokens);
  d = decode_decode_request(R"({"ids": []})", 2);
  ASSERT_EQ(d.ids.size(), 1u);
  EXPECT_TRUE(d.ids[0].empty());
  auto decode = [](const char* body) { decode_decode_request(body, 2); };
  EXPECT_EQ(status(decode, R"({"ids": [[1], [2], [3]]})"), 413);
  for (const char* bad : {R"({"ids": [-1]})", R"({"ids": [4294967296]})", R"({"ids": [[1], 2]})",
                          R"({"ids": [1, [2]]})", R"({"ids": {}})", R"({})"}) {
    EXPECT_EQ(status(decode, bad), 400) << bad;
  }
}

}  // namespace
}  // namespace bertfit::serve

namespace bertfit::serve {
namespace {

// Token-id inputs as TEI's untagged Input reads them: a list of integers is one input, a list of
// texts and id lists a batch; ids are the encoding verbatim, checked against the vocabulary and
// cut (or refused) at the length limit.
TEST(ServeProtocol, TokenIdInputs) {
  const EmbedRequest one = decode_embed_request(R"({"inputs": [2, 5, 3]})", 2);
  ASSERT_EQ(one.inputs.size(), 1u);  // one input, though longer than the batch limit
  EXPECT_EQ(one.inputs[0].ids, (std::vector<std::int64_t>{2, 5, 3}));
  const OpenAiEmbedRequest mixed = decode_openai_embed_request(R"({"input": [[2, 3], "x"]})", 2);
  ASSERT_EQ(mixed.inputs.size(), 2u);
  EXPECT_EQ(mixed.inputs[0].ids, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(mixed.inputs[1].a, "x");
  auto status_of = [](const char* body) {
    try {
      decode_embed_request(body, 2);
    } catch (const ApiError& e) {
      return e.status();
    }
    return 200;
  };
  EXPECT_EQ(status_of(R"({"inputs": [[1], [2], [3]]})"), 413);
  EXPECT_EQ(status_of(R"({"inputs": [1, -2]})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": [1, 2.5]})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": [4294967296]})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": [[1], 2]})"), 400);

  const WordPieceTokenizer& tok = tokenizer();
  const int V = tok.vocab_size();
  TextInput ids{"", std::nullopt, std::vector<std::int64_t>{2, 7, 8, 9, 3}};
  Encoding e = encode_input(tok, ids, false, TruncationDirection::kRight, 8);
  EXPECT_EQ(e.input_ids, (std::vector<std::int32_t>{2, 7, 8, 9, 3}));
  EXPECT_EQ(e.token_type_ids, (std::vector<std::int32_t>(5, 0)));
  e = encode_input(tok, ids, true, TruncationDirection::kLeft, 3);
  EXPECT_EQ(e.input_ids, (std::vector<std::int32_t>{8, 9, 3}));
  EXPECT_EQ(e.truncated_tokens, 2);
  try {
    encode_input(tok, ids, false, TruncationDirection::kRight, 4);
    ADD_FAILURE() << "a 5-id input past 4 tokens was accepted";
  } catch (const ApiError& err) {
    EXPECT_EQ(err.status(), 422);
    EXPECT_NE(std::string(err.what()).find("Given: 5"), std::string::npos) << err.what();
  }
  ids.ids = std::vector<std::int64_t>{2, V, 3};
  try {
    encode_input(tok, ids, true, TruncationDirection::kRight, 8);
    ADD_FAILURE() << "an id past the vocabulary was accepted";
  } catch (const ApiError& err) {
    EXPECT_EQ(err.status(), 422);
    EXPECT_NE(std::string(err.what()).find(std::to_string(V)), std::string::npos) << err.what();
  }
  ids.ids = std::vector<std::int64_t>{};
  try {
    encode_input(tok, ids, true, TruncationDirection::kRight, 8);
    ADD_FAILURE() << "an empty id list was accepted";
  } catch (const ApiError& err) {
    EXPECT_EQ(err.status(), 400);
  }
}

}  // namespace
}  // namespace bertfit::serve
