// Where a command's model comes from. --model (or the MODEL argument of inspect and convert)
// names a model folder or a Hugging Face Hub repository id; every command turns it into a
// folder here, before anything loads: a repository id is resolved to its snapshot folder in the
// Hugging Face cache (hub/hub.h: downloaded when missing; HF_ENDPOINT, HF_HOME, HF_HUB_CACHE,
// HF_TOKEN and HF_HUB_OFFLINE as huggingface_hub reads them) at --revision. flags/ declares the
// flags and knows nothing of the Hub.
#pragma once

#include <string>

#include "flags/flag.h"

namespace bertfit::cli {

// The MODEL argument of inspect and convert (a folder or a Hub repository id) and --revision.
FlagTable model_argument_flags(std::string& model, std::string& revision);

// The folder of the model that `value` names (`flag` names it in errors: "--model", "MODEL"):
//   "" (no model given)                         -> ""
//   an existing folder                          -> value (with --revision main: a folder has no
//                                                  revisions)
//   a Hub repository id that is no path here    -> its snapshot folder, at `revision`
// Throws Error naming the flag for an existing file, for a value that is neither a folder nor a
// repository id, and with the Hub's one-line message when the repository cannot be resolved.
std::string resolve_model_flag(const std::string& value, const std::string& revision,
                               const std::string& flag = "--model");

}  // namespace bertfit::cli
