// A command's model folder from --model or a Hub repository id (see model_source.h).
#include "apps/bertfit/model_source.h"

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "flags/groups.h"
#include "hub/hub.h"

namespace bertfit::cli {

FlagTable model_argument_flags(std::string& model, std::string& revision) {
  FlagTable table = {
      {"model",
       "Model folder (config.json and weights in any form transformers saves: model.safetensors, "
       "pytorch_model.bin, or either sharded behind its index), or a Hugging Face Hub repository "
       "id (org/name) that is not a folder here, downloaded into the Hugging Face cache",
       &model}};
  std::string unused;
  for (Flag& f : select_flags(model_flags(unused, revision), {"--revision"})) {
    table.push_back(std::move(f));
  }
  return table;
}

std::string resolve_model_flag(const std::string& value, const std::string& revision,
                               const std::string& flag) {
  if (value.empty()) return value;
  if (is_directory(value)) {
    if (revision != "main") {
      throw_error("--revision ", revision, " is for a Hub repository id, but ", flag, " ", value,
                  " is a folder here");
    }
    return value;
  }
  if (path_exists(value)) {
    throw_error(flag, " ", value,
                " is a file; give the model's folder (config.json, weights, vocab.txt) or a "
                "Hub repository id (org/name)");
  }
  if (!looks_like_repo_id(value)) {
    throw_error(flag, " ", value,
                ": no such folder, and not a Hugging Face Hub repository id (name or org/name)");
  }
  HubOptions options = hub_options_from_env();
  options.revision = revision;
  std::string folder;
  try {
    folder = resolve_model(value, options);
  } catch (const Error& e) {
    throw_error(flag, " ", value, " (not a folder here, so a Hub repository id): ", e.what());
  }
  log_info(flag, " ", value, " at revision ", revision, ": ", folder);
  return folder;
}

}  // namespace bertfit::cli
