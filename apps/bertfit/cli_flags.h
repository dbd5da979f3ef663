// Adds a flag table (flags/flag.h) to a CLI11 command: each entry becomes an option (a flag for
// a bool, a positional argument for a name without dashes) with its help and, where it has one,
// its default shown once; a choice entry rejects any other word, naming the flag and the words
// it accepts.
#pragma once

#include <CLI/CLI.hpp>

#include "flags/flag.h"
#include "model/family.h"

namespace bertfit::cli {

void add_flags(CLI::App& cmd, const FlagTable& table);

// The target of an --arch flag: one of the supported model_types (model/family.h); the field
// stays null until one is given.
ParsedTarget family_target(const ModelFamily*& field);

}  // namespace bertfit::cli
