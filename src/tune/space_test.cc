// The knob table and spaces (space.h) on machines made up for the test.
#include "tune/space.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"

namespace bertfit::tune {
namespace {

Machine two_cores() {
  Machine m;
  m.cores = 2;
  m.int8 = m.bf16 = true;
  m.tcmalloc = "/lib/tc.so";
  m.jemalloc = "/lib/je.so";
  m.mpi = true;
  return m;
}

std::vector<std::string> names(const Space& s) {
  std::vector<std::string> v;
  for (const auto& d : s.dims) v.push_back(d.knob->name);
  return v;
}

bool has_note(const Space& s, const std::string& start) {
  return std::any_of(s.dropped.begin(), s.dropped.end(),
                     [&](const std::string& n) { return n.rfind(start, 0) == 0; });
}

TEST(TuneSpace, EveryKnobHasADomainAnApplyAndADefaultInItsDomain) {
  const Machine m = two_cores();
  for (const Knob& k : knob_table()) {
    ASSERT_TRUE(k.domain && k.apply) << k.name;
    EXPECT_FALSE(k.help.empty()) << k.name;
    for (TuneMode mode : {TuneMode::kServe, TuneMode::kInfer, TuneMode::kTrain}) {
      if (!(k.modes & unsigned(mode))) continue;
      const Space s = build_space(mode, m, {}, {});
      const Setting d = s.defaults();
      ASSERT_TRUE(d.count(k.name)) << k.name;
      EXPECT_EQ(check_value(k, d.at(k.name), m, {}), "") << k.name;
    }
  }
  EXPECT_EQ(find_knob("nope"), nullptr);
}

TEST(TuneSpace, TwoCoresDropSpreadAndCountTheCombinations) {
  const Space infer = build_space(TuneMode::kInfer, two_cores(), {}, {});
  EXPECT_EQ(names(infer), (std::vector<std::string>{"layout", "wait", "bind", "allocator",
                                                    "precision", "batch_size"}));
  EXPECT_EQ(infer.dim("layout")->values, (std::vector<std::string>{"1x1", "1x2", "2x1"}));
  EXPECT_EQ(infer.combinations(), 3L * 5 * 2 * 3 * 3 * 4);
  EXPECT_TRUE(has_note(infer, "bind: spread"));
  EXPECT_EQ(infer.defaults().at("layout"), "1x2");
  EXPECT_EQ(infer.defaults().at("wait"), "default");
  const Space serve = build_space(TuneMode::kServe, two_cores(), {.max_tokens = 1024}, {});
  EXPECT_EQ(serve.dim("max_batch_tokens")->values.front(), "1024");
  EXPECT_EQ(serve.defaults().at("threads"), "2");
}

TEST(TuneSpace, WhatThisMachineLacksDropsOutWithANote) {
  Machine m = two_cores();
  m.cores = 1;
  m.int8 = m.bf16 = false;
  m.jemalloc.clear();
  m.mpi = false;
  const Space s = build_space(TuneMode::kTrain, m, {.global_batch = 16}, {});
  EXPECT_EQ(s.dim("ranks"), nullptr);
  EXPECT_EQ(s.dim("precision"), nullptr);
  EXPECT_EQ(s.fixed.at("precision"), "fp32");
  EXPECT_EQ(s.dim("allocator")->values, (std::vector<std::string>{"glibc", "tcmalloc"}));
  EXPECT_TRUE(has_note(s, "ranks: this build has no MPI"));
  EXPECT_TRUE(has_note(s, "precision: bf16: no native bf16"));
  EXPECT_TRUE(has_note(s, "allocator: not installed: jemalloc (apt-get install libjemalloc2)"));
  m.sanitized = true;
  EXPECT_EQ(build_space(TuneMode::kInfer, m, {}, {}).dim("allocator"), nullptr);
}

TEST(TuneSpace, FixHoldsOrRestrictsAKnobAndRefusesWhatIsNotThere) {
  const Space s =
      build_space(TuneMode::kServe, two_cores(), {}, {"precision=int8", "wait=passive,active"});
  EXPECT_EQ(s.dim("precision"), nullptr);
  EXPECT_EQ(s.fixed.at("precision"), "int8");
  EXPECT_EQ(s.dim("wait")->values, (std::vector<std::string>{"passive", "active"}));
  EXPECT_EQ(s.defaults().at("precision"), "int8");
  auto message = [](const std::vector<std::string>& fixes) {
    try {
      build_space(TuneMode::kServe, two_cores(), {}, fixes);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({"wiat=active"}), "--fix wiat=active: unknown knob 'wiat'");
  EXPECT_EQ(message({"layout=1x2"}), "--fix layout=1x2: knob 'layout' is not one of tune serve's");
  EXPECT_EQ(message({"precision=fp16"}),
            "--fix precision=fp16: 'fp16' is not one of fp32, bf16, int8 here");
  EXPECT_EQ(message({"wait"}), "--fix wait: give KNOB=VALUE or KNOB=V1,V2,...");
}

TEST(TuneSpace, ASettingBecomesFlagsAndEnvironment) {
  const Setting s{{"layout", "2x1"},     {"wait", "active"},   {"bind", "close"},
                  {"precision", "int8"}, {"batch_size", "16"}, {"allocator", "glibc"}};
  const Launch l = launch_of(s, {});
  EXPECT_EQ(l.processes, 2);
  EXPECT_EQ(l.threads, 1);
  EXPECT_EQ(l.flags, (std::vector<std::string>{"--threads", "1", "--precision", "int8",
                                               "--batch-size", "16"}));
  EXPECT_EQ(l.env, (std::vector<std::pair<std::string, std::string>>{{"OMP_WAIT_POLICY", "active"},
                                                                     {"OMP_PROC_BIND", "close"},
                                                                     {"OMP_PLACES", "cores"}}));
  EXPECT_EQ(command_line(l, "bertfit bench infer"),
            "OMP_WAIT_POLICY=active OMP_PROC_BIND=close OMP_PLACES=cores bertfit bench infer "
            "--threads 1 --precision int8 --batch-size 16");
  EXPECT_EQ(describe(s),
            "layout=2x1 wait=active bind=close allocator=glibc precision=int8 batch_size=16");
  // Defaults add nothing: the process runs as without tune.
  const Launch d = launch_of({{"wait", "default"}, {"bind", "none"}, {"allocator", "glibc"}}, {});
  EXPECT_TRUE(d.env.empty());
  EXPECT_TRUE(d.flags.empty());
  // The spin counts act while the policy is unset: only GOMP_SPINCOUNT.
  EXPECT_EQ(launch_of({{"wait", "spin-30k"}}, {}).env,
            (std::vector<std::pair<std::string, std::string>>{{"GOMP_SPINCOUNT", "30000"}}));
  EXPECT_EQ(launch_of({{"wait", "spin-30m"}}, {}).env,
            (std::vector<std::pair<std::string, std::string>>{{"GOMP_SPINCOUNT", "30000000"}}));
}

TEST(TuneSpace, TrainKeepsTheGlobalBatch) {
  const SpaceContext c{.global_batch = 32};
  const Space s = build_space(TuneMode::kTrain, two_cores(), c, {});
  EXPECT_EQ(s.dim("micro_batch")->values, (std::vector<std::string>{"4", "8", "16", "32"}));
  EXPECT_EQ(s.dim("ranks")->values, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(launch_of({{"ranks", "2"}, {"micro_batch", "8"}}, c).flags,
            (std::vector<std::string>{"--batch-size", "8", "--grad-accum", "2"}));
  EXPECT_EQ(launch_of({{"ranks", "2"}, {"micro_batch", "32"}}, c).flags,
            (std::vector<std::string>{"--batch-size", "16", "--grad-accum", "1"}));
  EXPECT_EQ(launch_of({{"ranks", "2"}}, c).processes, 2);
}

}  // namespace
}  // namespace bertfit::tune
