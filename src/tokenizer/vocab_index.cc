// Construction of the WordPiece vocabulary hash table (see vocab_index.h).
#include "tokenizer/vocab_index.h"

#include <limits>

#include "base/check.h"

namespace bertfit::tokenizer_detail {

void VocabIndex::build(const std::vector<std::string>& tokens,
                       std::string_view continuation_prefix) {
  std::size_t keys = 0;
  for (const std::string& t : tokens) {
    if (t.empty()) continue;
    ++keys;
    if (t.size() > continuation_prefix.size() && t.starts_with(continuation_prefix)) ++keys;
  }
  // Load factor at most 1/2 keeps linear probing short for both hits and misses.
  std::size_t size = 16;
  while (size < 2 * keys) size *= 2;
  slots_.assign(size, Slot{});
  mask_ = size - 1;
  pool_.clear();
  max_len_ = max_cont_len_ = 0;
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const std::string& t = tokens[id];
    if (t.empty()) continue;
    insert(t, false, static_cast<std::int32_t>(id));
    if (t.size() > continuation_prefix.size() && t.starts_with(continuation_prefix)) {
      insert(std::string_view(t).substr(continuation_prefix.size()), true,
             static_cast<std::int32_t>(id));
    }
  }
}

void VocabIndex::insert(std::string_view key, bool continuation, std::int32_t id) {
  // Keys longer than 64 KiB cannot be a sub-word anyone looks up within the 100-character
  // limit of WordPiece; they are left out of the index (they stay in the id -> token table).
  if (key.size() > std::numeric_limits<std::uint16_t>::max()) return;
  CHECK(pool_.size() + key.size() <= std::numeric_limits<std::uint32_t>::max(),
        "vocabulary too large: ", pool_.size(), " bytes");
  const std::uint64_t h = hash(key.data(), key.size(), continuation);
  const auto tag = static_cast<std::uint32_t>(h >> 32);
  for (std::uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.id < 0) {
      s = Slot{tag, id, static_cast<std::uint32_t>(pool_.size()),
               static_cast<std::uint16_t>(key.size()), continuation};
      pool_.append(key);
      std::size_t& m = continuation ? max_cont_len_ : max_len_;
      if (key.size() > m) m = key.size();
      return;
    }
    if (s.tag == tag && s.len == key.size() && s.continuation == continuation &&
        pool_.compare(s.offset, s.len, key) == 0) {
      s.id = id;  // a duplicate: the later id wins
      return;
    }
  }
}

}  // namespace bertfit::tokenizer_detail
