// The data and model of sentence-embedding training (train --objective embedding, the default for
// a sentence-transformers folder): the model's config with the embedding head (the folder's
// Pooling and Normalize modules, or --pooling on a plain encoder), the loss (--loss; auto:
// CoSENT for scored pairs, MultipleNegativesRankingLoss otherwise), the training file's rows of
// texts and the dev set, encoded: the dev file's scored pairs, or a retrieval set's queries and
// corpus (--queries, --corpus, --qrels; task/retrieval_data.h), one or the other. The loop is the
// classifier's: a micro-batch is every text of its samples (train/pair_objective.h computes the
// loss over them).
#pragma once

#include <string>

#include "model/st_folder.h"
#include "train/options.h"
#include "train/run_setup.h"

namespace bertfit {

// Whether the run trains sentence embeddings: --objective embedding, or auto with a
// sentence-transformers folder (`source` holds modules.json).
bool trains_embeddings(const TrainOptions& options, const std::string& source);

// The run data of sentence-embedding training from `source` (the model, or the checkpoint
// resumed). Errors name the flag (a classification flag given, --pooling on a folder whose modules
// decide it, --loss and the data disagreeing) or the file and line.
RunData load_embedding_data(const TrainOptions& options, const std::string& source);

// The modules a plain encoder's trained model is saved with: its --pooling (default mean),
// without Normalize, max_seq_length the run's --max-seq-len. (A sentence-transformers folder's
// own modules come with its ModelState.)
SentenceTransformerSpec plain_encoder_modules(const TrainOptions& options,
                                              const ModelConfig& config);

}  // namespace bertfit
