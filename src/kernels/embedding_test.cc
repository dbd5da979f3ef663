// Embeddings against the double reference (BERT with token types, DistilBERT without), the pad
// row receiving no word gradient, and thread-count independence of the scatter.
#include "kernels/embedding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/parallel.h"
#include "kernels/ref/ref.h"
#include "kernels/test_util.h"

namespace bertfit {
namespace {

using testing::all_close;
using testing::FloatView;
using testing::kU;
using testing::Rng;

constexpr int kVocab = 11, kPositions = 20, kTypes = 2, kPad = 0;

struct Tokens {
  std::vector<std::int32_t> ids, positions, types;
};

// Ids drawn from a small vocabulary so that rows repeat; about one in four is the pad id.
Tokens make_tokens(std::int64_t N, Rng& rng) {
  Tokens t;
  for (std::int64_t r = 0; r < N; ++r) {
    t.ids.push_back(rng.below(4) == 0 ? kPad : 1 + rng.below(kVocab - 1));
    t.positions.push_back(static_cast<std::int32_t>(r % kPositions));
    t.types.push_back(rng.below(kTypes));
  }
  return t;
}

void check_case(std::int64_t N, int C, bool with_types) {
  SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " types=" << with_types);
  Rng rng(N * 1000 + C);
  const Tokens tok = make_tokens(N, rng);
  FloatView word(kVocab * C), pos(kPositions * C), type(kTypes * C), out(N * C);
  word.fill_uniform(rng, -1, 1);
  pos.fill_uniform(rng, -1, 1);
  type.fill_uniform(rng, -1, 1);
  const std::int32_t* types = with_types ? tok.types.data() : nullptr;
  embedding_forward(out.data(), tok.ids.data(), tok.positions.data(), types, word.data(),
                    pos.data(), with_types ? type.data() : nullptr, N, C);
  std::vector<double> want(N * C);
  const std::vector<double> td = type.to_double();
  ref::embedding_forward(want.data(), tok.ids.data(), tok.positions.data(), types,
                         word.to_double().data(), pos.to_double().data(),
                         with_types ? td.data() : nullptr, N, C);
  // Two float additions of terms in [-1, 1]: <= 2u·3.
  EXPECT_TRUE(all_close(out.data(), want.data(), N * C, 6 * kU));

  FloatView dout(N * C), dword(kVocab * C), dpos(kPositions * C), dtype(kTypes * C);
  dout.fill_uniform(rng, -1, 1);
  dword.fill_uniform(rng, -1, 1);
  dpos.fill_uniform(rng, -1, 1);
  dtype.fill_uniform(rng, -1, 1);
  const std::vector<float> pad_row_before(dword.data() + kPad * C, dword.data() + (kPad + 1) * C);
  std::vector<double> rw = dword.to_double(), rp = dpos.to_double(), rt = dtype.to_double();
  ref::embedding_backward(rw.data(), rp.data(), with_types ? rt.data() : nullptr,
                          dout.to_double().data(), tok.ids.data(), tok.positions.data(), types, N,
                          C, kPad);
  embedding_backward(dword.data(), dpos.data(), with_types ? dtype.data() : nullptr, dout.data(),
                     tok.ids.data(), tok.positions.data(), types, N, C, kPad);
  // A table row receives at most N float additions of terms in [-1, 1] onto a value in
  // [-1, 1]: worst case error <= N·u·(N + 1).
  const double tol = N * kU * (N + 1);
  EXPECT_TRUE(all_close(dword.data(), rw.data(), kVocab * C, tol));
  EXPECT_TRUE(all_close(dpos.data(), rp.data(), kPositions * C, tol));
  if (with_types) {
    EXPECT_TRUE(all_close(dtype.data(), rt.data(), kTypes * C, tol));
  }
  // padding_idx: the pad row is untouched, bit for bit.
  const std::vector<float> pad_row_after(dword.data() + kPad * C, dword.data() + (kPad + 1) * C);
  EXPECT_EQ(pad_row_before, pad_row_after);
}

TEST(Embedding, MatchesReference) {
  for (bool with_types : {true, false}) {
    for (std::int64_t N : {1, 3, 17}) {
      for (int C : {1, 7, 63, 64, 65, 767, 768, 769}) check_case(N, C, with_types);
    }
    check_case(64, 768, with_types);  // multi-threaded path
  }
}

TEST(Embedding, BackwardIsIndependentOfThreadCount) {
  const std::int64_t N = 100;
  const int C = 769;
  Rng rng(4);
  const Tokens tok = make_tokens(N, rng);
  FloatView dout(N * C);
  dout.fill_uniform(rng, -1, 1);
  const int saved = num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    FloatView dword(kVocab * C), dpos(kPositions * C), dtype(kTypes * C);
    embedding_backward(dword.data(), dpos.data(), dtype.data(), dout.data(), tok.ids.data(),
                       tok.positions.data(), tok.types.data(), N, C, kPad);
    std::vector<float> all(dword.data(), dword.data() + kVocab * C);
    all.insert(all.end(), dpos.data(), dpos.data() + kPositions * C);
    all.insert(all.end(), dtype.data(), dtype.data() + kTypes * C);
    results.push_back(all);
  }
  set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

}  // namespace
}  // namespace bertfit
