// Token -> id lookup for WordPiece's greedy longest match: an open-addressing hash table over a
// byte pool, keyed by (bytes, continuation). Every vocabulary entry is a word-initial key; an
// entry "##xyz" is also the continuation key "xyz", so a continuation lookup needs no copy.
// Private to the tokenizer module.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace bertfit::tokenizer_detail {

class VocabIndex {
 public:
  // Builds the index of tokens[id] -> id. A token occurring twice maps to its last id, as a
  // Python dict built line by line does. Empty tokens are skipped.
  void build(const std::vector<std::string>& tokens, std::string_view continuation_prefix);

  // The id of key (a continuation key when continuation is true), or -1.
  std::int32_t find(const char* key, std::size_t len, bool continuation) const {
    const std::uint64_t h = hash(key, len, continuation);
    const auto tag = static_cast<std::uint32_t>(h >> 32);
    for (std::uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && s.len == len && s.continuation == continuation &&
          std::memcmp(pool_.data() + s.offset, key, len) == 0) {
        return s.id;
      }
    }
  }
  std::int32_t find(std::string_view key, bool continuation) const {
    return find(key.data(), key.size(), continuation);
  }
  // Length in bytes of the longest key of each kind: no longer substring can match.
  std::size_t max_len(bool continuation) const { return continuation ? max_cont_len_ : max_len_; }

 private:
  struct Slot {
    std::uint32_t tag = 0;  // high half of the hash
    std::int32_t id = -1;   // -1: empty
    std::uint32_t offset = 0;
    std::uint16_t len = 0;
    bool continuation = false;
  };

  static std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
    const unsigned __int128 m = static_cast<unsigned __int128>(a) * b;
    return static_cast<std::uint64_t>(m) ^ static_cast<std::uint64_t>(m >> 64);
  }
  static std::uint64_t hash(const char* p, std::size_t n, bool continuation) {
    std::uint64_t h = mix(n ^ (continuation ? 0xA0761D6478BD642Full : 0), 0x9E3779B97F4A7C15ull);
    while (n >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      h = mix(h ^ w, 0xE7037ED1A0B428DBull);
      p += 8;
      n -= 8;
    }
    if (n > 0) {
      std::uint64_t w = 0;
      for (std::size_t i = 0; i < n; ++i)
        w |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
      h = mix(h ^ w, 0x8EBC6AF09C88C6E3ull);
    }
    return h;
  }
  void insert(std::string_view key, bool continuation, std::int32_t id);

  std::vector<Slot> slots_;
  std::uint64_t mask_ = 0;
  std::string pool_;
  std::size_t max_len_ = 0, max_cont_len_ = 0;
};

}  // namespace bertfit::tokenizer_detail
