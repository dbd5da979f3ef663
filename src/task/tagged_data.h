// Tagged data for token classification as train and eval resolve it (run_ner.py's rules): when
// the data is tagged, which file format, the tag list and whose ids it keeps, and the dev set.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/tagged.h"
#include "flags/groups.h"
#include "model/config.h"
#include "task/dataset.h"

namespace bertfit {

// The data of `file` is tagged words (token classification): --format conll, a .conll name,
// --tokens-column / --tags-column given, or a JSONL file without --text-a-column.
bool is_tagged_data(const DataOptions& data, const std::string& file);

// Reads `file` as tagged data (CoNLL or JSONL, with tags unless !with_tags); integer JSONL tags
// name id2label's entries. With --skip-malformed, malformed sentences are left out and counted
// on stderr (LoadedTagged::skipped lists them).
LoadedTagged read_tagged(const DataOptions& data, const std::string& file,
                         const std::vector<std::string>& id2label, bool with_tags = true);

// The training data and head of a token-classification run, as run_ner decides them: the tags
// of --train-file sorted; a model's own trained token head keeps its ids when it knows every
// tag of the data (its tags may be more); --labels names the tags in id order (every data tag
// among them). A trained token head of another size is an error unless
// --ignore-mismatched-sizes (then a new head). head_outputs: the outputs of the checkpoint's
// token head, nullopt when it has none. --num-labels, --regression and --problem-type other
// than single-label do not apply (errors).
TrainData load_tagged_train_data(const DataOptions& data, const HeadOptions& head,
                                 const ModelConfig& model, std::optional<int> head_outputs,
                                 const std::string& model_dir);

// --dev-file as tagged data for `task` (tags must be among task.label_names).
LoadedTagged load_eval_tagged(const DataOptions& data, const TaskInfo& task);

// On stderr when truncation cut words of any sentence of `source`: "FILE: 3 of 100 sentences are
// longer than --max-seq-len 128 tokens; 17 words were cut (their tags are not learned or
// scored)".
void report_word_truncation(const std::string& source, const std::vector<EncodedExample>& encoded,
                            int max_seq_len);

// Removes the training sentences with no tagged word (an empty sentence): nothing to learn, and a
// batch of them alone would have no loss. Said on stderr with their count.
void drop_unlabelled(const std::string& source, std::vector<EncodedExample>& encoded);

}  // namespace bertfit
