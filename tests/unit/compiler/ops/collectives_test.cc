// Collectives of one participant: which programs qualify, what each collective means there, and
// the compiled code against the interpreter.
#include <gtest/gtest.h>

#include <string>

#include "compiler/codegen/cpu_codegen.h"
#include "compiler/hlo/collectives.h"
#include "compiler/hlo/parser.h"
#include "compiler/interp/interpreter.h"
#include "tests/unit/compiler/compile_check.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;
using ::testing::HasSubstr;

// The reason the first collective of `text` cannot run as one participant ("" when it can).
std::string WhyNot(const std::string& text) {
  auto m = hlo::ParseModule(text, "c.hlo");
  EXPECT_THAT(m, IsOk());
  if (!m) return "parse error";
  return hlo::WhyModuleNotSingleParticipant(*m);
}

std::string AllReduceWith(const std::string& header, const std::string& groups) {
  return "HloModule m" + header +
         "\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, "
         "y)\n}\n\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT r = f32[4] all-reduce(a), " +
         groups + "to_apply=add\n}\n";
}

TEST(CollectivesTest, OneParticipantIsTheProgramAndEveryGroup) {
  EXPECT_EQ(WhyNot(AllReduceWith("", "")), "");
  EXPECT_EQ(WhyNot(AllReduceWith(", replica_count=1, num_partitions=1", "replica_groups={}, ")),
            "");
  EXPECT_EQ(WhyNot(AllReduceWith("", "replica_groups={{0}}, ")), "");
  EXPECT_EQ(WhyNot(AllReduceWith("", "replica_groups=[1,1]<=[1], ")), "");
  EXPECT_THAT(WhyNot(AllReduceWith(", replica_count=2", "")), HasSubstr("2 participants"));
  EXPECT_THAT(WhyNot(AllReduceWith(", num_partitions=8", "")), HasSubstr("8 participants"));
  EXPECT_THAT(WhyNot(AllReduceWith("", "replica_groups={{0,1}}, ")), HasSubstr("2 participants"));
  EXPECT_THAT(WhyNot(AllReduceWith("", "replica_groups={{0},{1}}, ")), HasSubstr("2 participants"));
  EXPECT_THAT(WhyNot(AllReduceWith("", "replica_groups=[1,8]<=[8], ")),
              HasSubstr("8 participants"));
  EXPECT_THAT(WhyNot(AllReduceWith("", "replica_groups=[2,2]<=[2,2]T(1,0), ")),
              HasSubstr("4 participants"));
  EXPECT_THAT(WhyNot(AllReduceWith("", "replica_groups=mesh['x'=2,'y'=2] {'y'}, ")),
              HasSubstr("4 participants"));
  EXPECT_EQ(WhyNot("ENTRY e {\n  a = f32[4] parameter(0)\n  ROOT p = f32[4] "
                   "collective-permute(a), source_target_pairs={{0,0}}\n}"),
            "");
  EXPECT_THAT(WhyNot("ENTRY e {\n  a = f32[4] parameter(0)\n  ROOT p = f32[4] "
                     "collective-permute(a), source_target_pairs={{0,1},{1,0}}\n}"),
              HasSubstr("participant 1"));
  // A device-to-device transfer needs a peer; a host transfer is not a collective.
  const char* send = R"(ENTRY e {
  a = f32[4] parameter(0)
  t = token[] after-all()
  s = (f32[4], u32[], token[]) send(a, t), channel_id=1%s
  ROOT d = token[] send-done(s), channel_id=1%s
})";
  std::string device(send), host(send);
  for (std::string* text : {&device, &host}) {
    const std::string attr = text == &host ? ", is_host_transfer=true" : "";
    for (size_t at; (at = text->find("%s")) != std::string::npos;) text->replace(at, 2, attr);
  }
  EXPECT_THAT(WhyNot(device), HasSubstr("needs a peer"));
  EXPECT_EQ(WhyNot(host), "");
}

TEST(CollectivesTest, OneParticipantMeaningsInTheInterpreter) {
  auto m = hlo::ParseModule(R"(HloModule m, replica_count=1
add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
ENTRY e {
  a = s32[2,3] parameter(0)
  r = s32[2,3] all-reduce(a), replica_groups={}, to_apply=add
  g = s32[2,3] all-gather(r), dimensions={0}, replica_groups={{0}}
  s = s32[2,3] reduce-scatter(g), dimensions={1}, to_apply=add
  t = s32[2,3] all-to-all(s), dimensions={1}
  b = s32[2,3] collective-broadcast(t), replica_groups={{0}}
  p = s32[2,3] collective-permute(b), source_target_pairs={{0,0}}
  z = s32[2,3] collective-permute(b), source_target_pairs={}
  id = u32[] partition-id()
  ROOT o = (s32[2,3], s32[2,3], u32[]) tuple(p, z, id)
})",
                            "c.hlo");
  ASSERT_THAT(m, IsOk());
  const Literal a = Array(PrimitiveType::kS32, {2, 3}, {1, -2, 3, -4, 5, -6});
  const std::vector<Literal> args = {a};
  auto out = interp::Evaluate(*m, args);
  ASSERT_THAT(out, IsOk());
  EXPECT_TRUE(out->elements()[0] == a) << out->elements()[0].ToString();
  EXPECT_TRUE(out->elements()[1] == Array(PrimitiveType::kS32, {2, 3}, {0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(out->elements()[2].GetInt(0), 0);
}

TEST(CollectivesTest, CompiledCollectivesMatchTheInterpreter) {
  ExpectCompiledMatchesInterpreterOnRandomInputs(R"(HloModule m, replica_count=1
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[4,3] parameter(0)
  b = s32[5] parameter(1)
  r = f32[4,3] all-reduce(a), replica_groups={{0}}, to_apply=add
  s = (f32[4,3], s32[5]) all-reduce(r, b), to_apply=add
  rs = f32[4,3] all-reduce-start(a), to_apply=add
  rd = f32[4,3] all-reduce-done(rs)
  gs = (f32[4,3], f32[4,3]) all-gather-start(rd), dimensions={1}
  gd = f32[4,3] all-gather-done(gs)
  ps = (f32[4,3], f32[4,3], u32[], u32[]) collective-permute-start(gd), source_target_pairs={{0,0}}
  pd = f32[4,3] collective-permute-done(ps)
  z = s32[5] collective-permute(b), source_target_pairs={}
  id = u32[] replica-id()
  g0 = f32[4,3] get-tuple-element(s), index=0
  sum = f32[4,3] add(g0, pd)
  ROOT t = (f32[4,3], u32[], s32[5], (f32[4,3], s32[5])) tuple(sum, id, z, s)
})");
}

TEST(CollectivesTest, SeveralParticipantsAreRefusedWithTheirLine) {
  auto m = hlo::ParseModule(AllReduceWith("", "replica_groups={{0,1}}, "), "c.hlo");
  ASSERT_THAT(m, IsOk());
  EXPECT_THAT(LowerToCpp(*m), StatusIs(StatusCode::kFailedPrecondition,
                                       HasSubstr("c.hlo:11: hlocache does not support a "
                                                 "collective of more than one participant")));
  const std::vector<Literal> args = {Array(PrimitiveType::kF32, {4}, {1, 2, 3, 4})};
  EXPECT_THAT(interp::Evaluate(*m, args),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("2 participants")));
  // A result that does not keep the operand's shape is malformed with one participant.
  auto grows = hlo::ParseModule(
      "ENTRY e {\n  a = f32[4] parameter(0)\n  ROOT g = f32[8] all-gather(a), dimensions={0}\n}",
      "c.hlo");
  ASSERT_THAT(grows, IsOk());
  EXPECT_THAT(LowerToCpp(*grows), StatusIs(StatusCode::kInvalidArgument, HasSubstr("c.hlo:3:")));
}

}  // namespace
}  // namespace hlocache::compiler
