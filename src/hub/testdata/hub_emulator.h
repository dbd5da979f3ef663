// testdata/hub_emulator.py (a Hugging Face Hub on 127.0.0.1) in a child process, for the tests
// of the hub library (src/hub/hub_test.cc) and of the commands that use it
// (tests/cli/hub_cli_test.cc). The including target defines BERTFIT_HUB_EMULATOR as the script's
// path. Header-only: the two tests live in different folders and link nothing in common.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace bertfit::testing {

class HubEmulator {
 public:
  // Serves `config` (the script's CONFIG.json, see its usage) and keeps its files (the config,
  // the ports, the request log) in `dir`. Child processes inherit no_proxy=*: loopback needs no
  // proxy, whatever the environment says.
  HubEmulator(const std::string& dir, const nlohmann::json& config) {
    namespace fs = std::filesystem;
    ::setenv("no_proxy", "*", 1);
    ::setenv("NO_PROXY", "*", 1);
    const std::string config_path = dir + "/emulator.json";
    std::ofstream(config_path) << config.dump();
    ports_ = dir + "/ports.json";
    log_ = dir + "/requests.jsonl";
    fs::remove(ports_);
    const std::string python =
        ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    std::vector<std::string> args = {
        python, BERTFIT_HUB_EMULATOR, "--config", config_path, "--port-file", ports_, "--log",
        log_};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(::posix_spawnp(&pid_, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    for (int i = 0; i < 400 && !fs::exists(ports_); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    std::ifstream in(ports_);
    const nlohmann::json ports = nlohmann::json::parse(in);
    hub_port_ = ports["hub"];
    cdn_port_ = ports["cdn"];
  }
  ~HubEmulator() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  HubEmulator(const HubEmulator&) = delete;
  HubEmulator& operator=(const HubEmulator&) = delete;

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(hub_port_); }
  // Every request so far, one JSON object each (server, method, path, authorization, range,
  // accept_encoding).
  std::vector<nlohmann::json> requests() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  void clear_log() const { std::filesystem::remove(log_); }

 private:
  pid_t pid_ = -1;
  std::string ports_, log_;
  int hub_port_ = 0, cdn_port_ = 0;
};

}  // namespace bertfit::testing
