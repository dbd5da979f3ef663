// `bertfit serve` when the process runs out of descriptors, through the binary over loopback: more
// idle connections than `ulimit -n` allows. The server once re-armed accept() at once after
// EMFILE and spun (12 s of CPU in 10 s, millions of log lines).
//
// Labelled no_asan: under AddressSanitizer/UBSan the sanitizer runtime itself needs descriptors
// (it checks whether memory is readable through a pipe), so at EMFILE it reports a checked object
// as invalid and halts: the run would test the sanitizer, not the server. The reaping of idle
// connections at the cap, which never reaches EMFILE, runs under the sanitizers in
// serve_attack_cli_test.cc.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "serve_client.h"

namespace bertfit::testing {
namespace {

const char* kFast = " --max-batch-tokens 4096 --tokenization-workers 2";

const std::string& tiny_model() {
  static TempDir tmp;
  static const std::string dir = [] {
    const std::string d = tmp / "tiny";
    init_tiny_model(d, "distilbert", 2);
    return d;
  }();
  return dir;
}

void expect_answers(int port) {
  HttpClient client(port);
  HttpReply r = client.post("/predict", R"({"inputs": "still here"})");
  EXPECT_EQ(r.status, 200) << r.body;
}

// The flood that once spun: more idle connections than `ulimit -n` allows, with
// --max-connections above the limit so that accept() does fail with EMFILE. For 10 s the server
// must sleep between attempts (CPU < 1 s), write < 100 log lines, and answer afterwards.
TEST(ServeAttack, DescriptorExhaustionNeitherSpinsNorFloodsTheLog) {
  ServeProcess server("--model " + tiny_model() + kFast + " --max-connections 1000",
                      ServeSetup{64, {}});
  ASSERT_TRUE(server.started());
  const long lines_before = count_lines(server.err());
  const long cpu_before = cpu_ticks(server.pid());
  std::vector<int> flood;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    // Keep ~100 idle connections open; connections the server closed are replaced.
    for (auto it = flood.begin(); it != flood.end();) {
      char c;
      if (::recv(*it, &c, 1, MSG_DONTWAIT | MSG_PEEK) == 0) {
        ::close(*it);
        it = flood.erase(it);
      } else {
        ++it;
      }
    }
    while (flood.size() < 100) {
      const int fd = open_idle_connection(server.port());
      if (fd < 0) break;
      flood.push_back(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const long cpu = cpu_ticks(server.pid()) - cpu_before;
  for (int fd : flood) ::close(fd);
  EXPECT_LT(cpu, 100) << "the server used " << cpu << " ticks of CPU in a 10 s flood";
  const std::string err = server.err();
  EXPECT_LT(count_lines(err) - lines_before, 100) << err.substr(0, 2000);
  EXPECT_NE(err.find("Too many open files"), std::string::npos) << err.substr(0, 2000);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  expect_answers(server.port());
  HttpClient client(server.port());
  const std::string m = client.get("/metrics").body;
  EXPECT_GT(
      metric_value(m, "bertfit_rejections_total{reason=\"accept_no_resources\",status=\"none\"}"),
      0)
      << m;
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.err();
}

}  // namespace
}  // namespace bertfit::testing
