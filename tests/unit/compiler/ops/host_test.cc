// Transfers with the host: infeed, outfeed, and host send and recv. The interpreter against a
// recording host, the compiled code against the interpreter (results and every value sent), a
// host inside a loop, runs without a host or with one that refuses, and malformed forms.
#include <gtest/gtest.h>

#include <string>

#include "compiler/artifact/execute.h"
#include "compiler/artifact/loader.h"
#include "tests/unit/compiler/ops/op_check.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::HostTransferKind;
using interp::Literal;
using interp::RecordingHost;
using op_check::ExpectMalformed;
using op_check::Replaced;

// Takes a pair from the feed, sends their sum on channel 3, receives a scale on channel 4,
// and puts the scaled sum on the outfeed.
constexpr char kTransfers[] = R"(HloModule m

ENTRY e {
  t0 = token[] parameter(0)
  in = ((f32[4], s32[]), token[]) infeed(t0)
  pair = (f32[4], s32[]) get-tuple-element(in), index=0
  x = f32[4] get-tuple-element(pair), index=0
  n = s32[] get-tuple-element(pair), index=1
  nf = f32[] convert(n)
  nb = f32[4] broadcast(nf), dimensions={}
  sum = f32[4] add(x, nb)
  t1 = token[] get-tuple-element(in), index=1
  s = (f32[4], u32[], token[]) send(sum, t1), channel_id=3, is_host_transfer=true
  sd = token[] send-done(s), channel_id=3, is_host_transfer=true
  r = (f32[], u32[], token[]) recv(sd), channel_id=4, is_host_transfer=true
  rd = (f32[], token[]) recv-done(r), channel_id=4, is_host_transfer=true
  scale = f32[] get-tuple-element(rd), index=0
  sb = f32[4] broadcast(scale), dimensions={}
  scaled = f32[4] multiply(sum, sb)
  t2 = token[] get-tuple-element(rd), index=1
  ROOT out = token[] outfeed(scaled, t2), outfeed_shape=f32[4]
}
)";

TEST(HostTest, TheInterpreterTakesFromAndGivesToItsHost) {
  auto m = hlo::ParseModule(kTransfers, "g.hlo");
  ASSERT_THAT(m, IsOk());
  const std::vector<Literal> args = {Token()};
  RecordingHost host(11);
  auto r = interp::Evaluate(*m, args, &host);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(host.received().size(), 2u);
  EXPECT_EQ(host.received()[0].kind, HostTransferKind::kFeed);
  EXPECT_EQ(host.received()[1].channel, 4);
  const Literal& x = host.received()[0].leaves[0];
  const int64_t n = host.received()[0].leaves[1].GetInt(0);
  const double scale = host.received()[1].leaves[0].GetFloat(0);
  ASSERT_EQ(host.sent().size(), 2u);
  EXPECT_EQ(host.sent()[0].kind, HostTransferKind::kChannel);
  EXPECT_EQ(host.sent()[0].channel, 3);
  EXPECT_EQ(host.sent()[1].kind, HostTransferKind::kFeed);
  for (size_t i = 0; i < 4; ++i) {
    const double sum =
        interp::RoundToType(x.GetFloat(i) + static_cast<double>(n), PrimitiveType::kF32);
    EXPECT_EQ(host.sent()[0].leaves[0].GetFloat(i), sum);
    EXPECT_EQ(host.sent()[1].leaves[0].GetFloat(i),
              interp::RoundToType(sum * scale, PrimitiveType::kF32));
  }
  // The same seed gives the same values; without a host the program cannot run.
  RecordingHost again(11);
  ASSERT_THAT(interp::Evaluate(*m, args, &again), IsOk());
  EXPECT_EQ(interp::CompareSent(host, again), "");
  EXPECT_THAT(interp::Evaluate(*m, args),
              StatusIs(StatusCode::kFailedPrecondition,
                       ::testing::HasSubstr("infeed without a host to transfer with")));
}

TEST(HostTest, CompiledTransfersMatchTheInterpreter) {
  ExpectCompiledMatchesInterpreter(kTransfers, {Token()});
  // A transfer in a loop's body: five values in, five sums out, in order.
  ExpectCompiledMatchesInterpreter(R"(HloModule m

cond {
  s = (s32[], f32[2], token[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  five = s32[] constant(5)
  ROOT lt = pred[] compare(i, five), direction=LT
}

body {
  s = (s32[], f32[2], token[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = f32[2] get-tuple-element(s), index=1
  t = token[] get-tuple-element(s), index=2
  in = (f32[2], token[]) infeed(t)
  v = f32[2] get-tuple-element(in), index=0
  t2 = token[] get-tuple-element(in), index=1
  sum = f32[2] add(acc, v)
  t3 = token[] outfeed(sum, t2)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT next = (s32[], f32[2], token[]) tuple(j, sum, t3)
}

ENTRY e {
  t0 = token[] after-all()
  zero = s32[] constant(0)
  z = f32[] constant(0)
  acc = f32[2] broadcast(z), dimensions={}
  init = (s32[], f32[2], token[]) tuple(zero, acc, t0)
  loop = (s32[], f32[2], token[]) while(init), condition=cond, body=body
  ROOT total = f32[2] get-tuple-element(loop), index=1
}
)",
                                   {});
}

// A host that has nothing to give.
class RefusingHost : public interp::HostTransfers {
 public:
  Result<Literal> Receive(HostTransferKind, int64_t, const hlo::Shape&) override {
    return Error(Unavailable("the feed is empty"));
  }
  Status Send(HostTransferKind, int64_t, const Literal&) override { return Status::Ok(); }
};

TEST(HostTest, ARunWithoutAHostOrWithARefusingOneFailsWithTheReason) {
  auto m = hlo::ParseModule(kTransfers, "g.hlo");
  ASSERT_THAT(m, IsOk());
  const std::unique_ptr<LoadedExecutable> loaded = BuildAndLoad(*m);
  ASSERT_NE(loaded, nullptr);
  auto abi = EntryLeavesOf(*m);
  ASSERT_THAT(abi, IsOk());
  const std::vector<Literal> args = {Token()};
  EXPECT_THAT(Execute(*loaded, *abi, args),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::HasSubstr("without one")));
  RefusingHost refusing;
  EXPECT_THAT(Execute(*loaded, *abi, args, &refusing),
              StatusIs(StatusCode::kUnavailable, ::testing::HasSubstr("the feed is empty")));
  EXPECT_THAT(interp::Evaluate(*m, args, &refusing),
              StatusIs(StatusCode::kUnavailable, ::testing::HasSubstr("the feed is empty")));
  // The executable is left as it was: a run with a host still works.
  RecordingHost host(1);
  EXPECT_THAT(Execute(*loaded, *abi, args, &host), IsOk());
  EXPECT_EQ(host.sent().size(), 2u);
}

TEST(HostTest, MalformedTransfersAreRefusedWithTheirLine) {
  ExpectMalformed(
      Replaced(kTransfers, "((f32[4], s32[]), token[]) infeed", "(f32[4], s32[]) infeed"),
      "in = ", "the result is not (value, token)");
  ExpectMalformed(Replaced(kTransfers, "send(sum, t1)", "send(sum, sum)"),
                  "s = ", "takes a value and a token");
  ExpectMalformed(Replaced(kTransfers, "(f32[], token[]) recv-done", "(f32[2], token[]) recv-done"),
                  "rd = ", "the result is not (the value received, token)");
  ExpectMalformed(Replaced(kTransfers, "channel_id=3, is_host_transfer=true\n  sd",
                           "channel_id=-3, is_host_transfer=true\n  sd"),
                  "s = ", "channel_id is not a non-negative integer");
  // Between devices: well-formed, but a program of one participant has no peer.
  auto m = hlo::ParseModule(
      Replaced(kTransfers, "channel_id=3, is_host_transfer=true\n  sd", "channel_id=3\n  sd"),
      "g.hlo");
  ASSERT_THAT(m, IsOk());
  EXPECT_THAT(LowerToCpp(*m), StatusIs(StatusCode::kFailedPrecondition,
                                       ::testing::HasSubstr("a send or recv between devices")));
}

}  // namespace
}  // namespace hlocache::compiler
