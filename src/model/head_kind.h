// The kinds of head a model can have (model/head.h), named apart from the heads themselves so
// that configs and families can say which one a model has.
#pragma once

namespace bertfit {

// Sequence classification: labels (or a score) for the whole input, from its first token.
// Token classification: labels for every token.
enum class HeadKind { kSequenceClassification, kTokenClassification };

// Names for messages, one per kind (a new kind that lacks one does not compile).
const char* head_kind_name(HeadKind kind);  // "sequence classification", "token classification"
const char* head_kind_noun(HeadKind kind);  // "sequence classifier", "token classifier"

}  // namespace bertfit
