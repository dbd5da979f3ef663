// The message of the Error a call throws ("" when it throws none), for tests that check what a
// user is told.
#pragma once

#include <string>
#include <utility>

#include "base/error.h"

namespace bertfit::testing {

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    std::forward<Fn>(fn)();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace bertfit::testing
