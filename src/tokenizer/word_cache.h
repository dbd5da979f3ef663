// A bounded, thread-safe cache of word -> BPE pieces, as the Rust tokenizers library keeps one
// for its BPE model: sharded by the word's hash, each shard a hash map behind a reader-writer
// lock. When a shard is full, new words are simply not cached (no eviction: the first words of a
// corpus are its frequent ones). Private to the tokenizer module.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bertfit::tokenizer_detail {

// One token of a cached word: its id and how many bytes of the word it covers.
struct CachedPiece {
  std::int32_t id;
  std::uint32_t bytes;
};

class WordCache {
 public:
  // capacity: words kept in all; words longer than max_word_bytes are never cached.
  explicit WordCache(std::size_t capacity = 1 << 16, std::size_t max_word_bytes = 64)
      : shards_(std::make_unique<Shard[]>(kShards)),
        per_shard_(capacity / kShards),
        max_word_bytes_(max_word_bytes) {}

  // Appends the pieces of word to out and returns true if word is cached.
  bool find(std::string_view word, std::vector<CachedPiece>& out) const {
    if (word.size() > max_word_bytes_) return false;
    const std::size_t h = std::hash<std::string_view>{}(word);
    const Shard& s = shards_[h % kShards];
    std::shared_lock lock(s.mutex);
    const auto it = s.map.find(word);
    if (it == s.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void insert(std::string_view word, const CachedPiece* pieces, std::size_t n) const {
    if (word.size() > max_word_bytes_) return;
    const std::size_t h = std::hash<std::string_view>{}(word);
    Shard& s = shards_[h % kShards];
    std::unique_lock lock(s.mutex);
    if (s.map.size() >= per_shard_) return;
    s.map.try_emplace(std::string(word), pieces, pieces + n);
  }

 private:
  static constexpr std::size_t kShards = 64;
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    mutable std::shared_mutex mutex;
    std::unordered_map<std::string, std::vector<CachedPiece>, Hash, std::equal_to<>> map;
  };
  std::unique_ptr<Shard[]> shards_;
  std::size_t per_shard_;
  std::size_t max_word_bytes_;
};

}  // namespace bertfit::tokenizer_detail
