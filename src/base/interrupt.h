// Ctrl-C and SIGTERM as a request to stop at the next safe point instead of dying mid-write.
// While an InterruptGuard lives, the first SIGINT or SIGTERM only sets a flag that the work
// loop polls; the default action is restored at once, so a second signal ends the process.
#pragma once

namespace bertfit {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers and clears the flag
  ~InterruptGuard();  // restores the previous handlers
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  static bool requested();  // a signal arrived since the guard was made
  static int signal();      // which one (SIGINT or SIGTERM), 0 if none
};

}  // namespace bertfit
