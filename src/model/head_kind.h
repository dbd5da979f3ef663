// The kinds of head a model can have (model/head.h), named apart from the heads themselves so
// that configs and families can say which one a model has.
#pragma once

namespace bertfit {

// Sequence classification: labels (or a score) for the whole input, from its first token.
// Token classification: labels for every token.
// Embedding: a vector for the whole input, pooled from its tokens (sentence-transformers).
enum class HeadKind { kSequenceClassification, kTokenClassification, kEmbedding };

// Names for messages, one per kind (a new kind that lacks one does not compile).
const char* head_kind_name(HeadKind kind);  // "sequence classification", ..., "sentence embedding"
const char* head_kind_noun(HeadKind kind);  // "sequence classifier", ..., "sentence embedder"

}  // namespace bertfit
