// Encoding tagged sentences for token classification: each word tokenized alone, tags aligned
// with the first sub-token of their word, whole-word truncation (encode_tagged of batch.h).
#include <exception>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/check.h"
#include "base/error.h"
#include "base/parallel.h"
#include "data/batch.h"

namespace bertfit {
namespace {

constexpr std::int32_t kIgnore = -100;  // PyTorch cross-entropy's ignore_index
constexpr std::int32_t kNoLabel = -1;   // a word's first sub-token in unlabeled data

std::string label_list(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 20; ++i) {
    out += cat(i == 0 ? "" : ", ", "'", names[i], "'");
  }
  if (names.size() > 20) out += cat(", ... (", names.size(), " in all)");
  return out.empty() ? "(none)" : out;
}

// Thrown by encode_sentence for word `word` whose tag is not a label.
struct UnknownTag {
  std::size_t word = 0;
};

// Encodes one sentence; words are kept whole while their sub-tokens fit in `room`.
EncodedExample encode_sentence(const Tokenizer& tokenizer, const TaggedSentence& sentence,
                               const std::unordered_map<std::string, std::int32_t>& label_id,
                               int max_len, int room) {
  const bool labeled = !sentence.tags.empty();
  CHECK(!labeled || sentence.tags.size() == sentence.words.size(), "sentence at line ",
        sentence.line, " has ", sentence.words.size(), " words but ", sentence.tags.size(),
        " tags");
  std::vector<std::int32_t> ids;
  std::vector<std::size_t> run_end;  // run_end[w]: ids.size() after word w
  run_end.reserve(sentence.words.size());
  for (const std::string& word : sentence.words) {
    tokenizer.tokenize_word_into(word, ids);
    run_end.push_back(ids.size());
  }
  std::size_t kept = 0;
  while (kept < run_end.size() && run_end[kept] <= static_cast<std::size_t>(room)) ++kept;
  const std::size_t kept_tokens = kept == 0 ? 0 : run_end[kept - 1];

  EncodedExample out;
  out.truncated_words = static_cast<std::int64_t>(sentence.words.size() - kept);
  out.truncated_tokens = static_cast<std::int64_t>(ids.size() - kept_tokens);
  ids.resize(kept_tokens);
  Encoding enc = tokenizer.encode_ids(ids, std::nullopt, max_len);
  // The single-sequence template of every family is one special token, the text, one special.
  CHECK(enc.truncated_tokens == 0 && enc.input_ids.size() == ids.size() + 2 &&
            enc.input_ids.front() == tokenizer.cls_id() &&
            enc.input_ids.back() == tokenizer.sep_id(),
        "unexpected single-sequence template");
  out.ids = std::move(enc.input_ids);
  out.type_ids = std::move(enc.token_type_ids);
  out.token_labels.assign(out.ids.size(), kIgnore);
  out.word_ids.assign(out.ids.size(), -1);
  std::size_t begin = 0;
  for (std::size_t w = 0; w < kept; ++w) {
    const std::size_t end = run_end[w];
    for (std::size_t t = begin; t < end; ++t) out.word_ids[t + 1] = static_cast<std::int32_t>(w);
    if (begin < end) {  // a word without sub-tokens has no position (its tag is not learnt)
      std::int32_t id = kNoLabel;
      if (labeled) {
        auto it = label_id.find(sentence.tags[w]);
        if (it == label_id.end()) throw UnknownTag{w};
        id = it->second;
      }
      out.token_labels[begin + 1] = id;
    }
    begin = end;
  }
  return out;
}

std::string unknown_tag_message(const LoadedTagged& data, const TaggedSentence& sentence,
                                std::size_t word, const std::vector<std::string>& label_names) {
  const std::int64_t line =
      sentence.line + (data.one_word_per_line ? static_cast<std::int64_t>(word) : 0);
  return cat(data.path, ":", line, ": the tag '", sentence.tags[word], "' of the word '",
             sentence.words[word], "' is not one of the labels: ", label_list(label_names));
}

}  // namespace

std::vector<EncodedExample> encode_tagged(const Tokenizer& tokenizer, const LoadedTagged& data,
                                          const std::vector<std::string>& label_names,
                                          int max_len) {
  if (max_len < 2) throw_error("maximum sequence length must be at least 2, got ", max_len);
  const int room = max_len - tokenizer.num_special_tokens(/*pair=*/false);
  std::unordered_map<std::string, std::int32_t> label_id;
  for (std::size_t i = 0; i < label_names.size(); ++i) {
    label_id.emplace(label_names[i], static_cast<std::int32_t>(i));
  }
  const auto& sentences = data.sentences;
  std::vector<EncodedExample> out(sentences.size());
  // No exception may leave the parallel region: the first failure (lowest index) is kept and
  // rethrown after the loop.
  std::mutex mutex;
  std::int64_t failed_index = -1;
  std::string failure;
  parallel_for(static_cast<std::int64_t>(sentences.size()), 64,
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t i = begin; i < end; ++i) {
                   std::string error;
                   try {
                     out[i] = encode_sentence(tokenizer, sentences[i], label_id, max_len, room);
                     continue;
                   } catch (const UnknownTag& e) {
                     error = unknown_tag_message(data, sentences[i], e.word, label_names);
                   } catch (const std::exception& e) {
                     error = cat(data.path, ":", sentences[i].line, ": ", e.what());
                   }
                   std::lock_guard<std::mutex> lock(mutex);
                   if (failed_index < 0 || i < failed_index) {
                     failed_index = i;
                     failure = std::move(error);
                   }
                   return;
                 }
               });
  if (failed_index >= 0) throw Error(failure);
  return out;
}

}  // namespace bertfit
