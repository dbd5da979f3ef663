// The flag table helpers: a choice flag reads and writes its enum field through its words only,
// selecting entries keeps the asked order, and the shared groups declare each flag once.
#include "flags/flag.h"

#include <gtest/gtest.h>

#include <set>

#include "flags/groups.h"

namespace bertfit {
namespace {

enum class Colour { kRed, kGreen, kBlue };

TEST(Flag, ChoiceTargetParsesItsWordsOnly) {
  Colour c = Colour::kGreen;
  ParsedTarget t =
      choice_target(c, {{"red", Colour::kRed}, {"green", Colour::kGreen}, {"blue", Colour::kBlue}});
  EXPECT_EQ(t.label, "{red,green,blue}");
  EXPECT_EQ(t.accepted, "red, green or blue");
  EXPECT_EQ(t.get(), "green");
  EXPECT_TRUE(t.set("blue"));
  EXPECT_EQ(c, Colour::kBlue);
  EXPECT_EQ(t.get(), "blue");
  EXPECT_FALSE(t.set("Blue"));
  EXPECT_FALSE(t.set(""));
  EXPECT_EQ(c, Colour::kBlue);
}

TEST(Flag, SelectKeepsTheAskedOrder) {
  DataOptions d;
  FlagTable t = select_flags(data_flags(d), {"--no-header", "--task"});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "--no-header");
  EXPECT_EQ(t[1].name, "--task");
  EXPECT_TRUE(std::holds_alternative<bool*>(t[0].target));
  EXPECT_EQ(std::get<bool*>(t[0].target), &d.no_header);
}

TEST(Flag, SharedGroupsDeclareEachFlagOnce) {
  std::string model, revision;
  ComputeOptions c;
  DataOptions d;
  std::set<std::string> names;
  for (const Flag& f :
       join_flags({model_flags(model, revision), compute_flags(c), data_flags(d)})) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_EQ(f.name.rfind("--", 0), 0u) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
  }
}

TEST(Flag, PrecisionIsAChoice) {
  ComputeOptions c;
  const Flag f = select_flags(compute_flags(c), {"--precision"})[0];
  const ParsedTarget& t = std::get<ParsedTarget>(f.target);
  EXPECT_EQ(t.get(), "fp32");
  EXPECT_TRUE(t.set("bf16"));
  EXPECT_EQ(c.precision, Precision::kBF16);
  EXPECT_TRUE(t.set("int8"));
  EXPECT_EQ(c.precision, Precision::kInt8);
  EXPECT_FALSE(t.set("fp16"));
  EXPECT_EQ(t.accepted, "fp32, bf16 or int8");
}

}  // namespace
}  // namespace bertfit
