// Signal handlers of InterruptGuard: they only store the signal number (async-signal-safe).
#include "base/interrupt.h"

#include <signal.h>

#include <atomic>

namespace bertfit {
namespace {

std::atomic<int> g_signal{0};
struct sigaction g_old_int, g_old_term;

void on_signal(int sig) { g_signal.store(sig); }

void install(int sig, struct sigaction* old) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;  // a second signal takes the default action
  sigaction(sig, &sa, old);
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal.store(0);
  install(SIGINT, &g_old_int);
  install(SIGTERM, &g_old_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

bool InterruptGuard::requested() { return g_signal.load() != 0; }
int InterruptGuard::signal() { return g_signal.load(); }

}  // namespace bertfit
