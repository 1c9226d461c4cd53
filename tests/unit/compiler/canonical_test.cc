#include "compiler/hlo/canonical.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "compiler/hlo/canonical_builder.h"
#include "compiler/hlo/parser.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::hlo {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// How many times `what` occurs in `text`, overlaps included.
size_t Occurrences(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string Canon(const std::string& text, bool allow_elided = false) {
  auto m = ParseModule(text, "t.hlo");
  EXPECT_THAT(m, IsOk()) << text;
  if (!m) return "<parse error>";
  auto c = Canonicalize(*m, {.allow_elided_constants = allow_elided});
  EXPECT_THAT(c, IsOk());
  return c ? c->text : "<canonicalize error>";
}

constexpr char kBase[] = R"(HloModule SyncTensorsGraph.316, replica_count=1

%add.1 (x.2: f32[], y.3: f32[]) -> f32[] {
  %x.2 = f32[] parameter(0)
  %y.3 = f32[] parameter(1)
  ROOT %add.4 = f32[] add(f32[] %x.2, f32[] %y.3)
}

ENTRY %main.10 (p0.1: f32[2,3], p1.2: f32[2,3]) -> f32[2] {
  %p0.1 = f32[2,3]{1,0} parameter(0), metadata={op_type="x" source_file="/home/a/x.py" source_line=3}
  %p1.2 = f32[2,3]{1,0} parameter(1)
  %c.5 = f32[] constant(0.5)
  %b.6 = f32[2,3] broadcast(%c.5), dimensions={}
  %m.7 = f32[2,3] multiply(%p0.1, %b.6)
  %s.8 = f32[2,3] subtract(%m.7, %p1.2), sharding={replicated}
  %z.9 = f32[] constant(0)
  ROOT %r.10 = f32[2] reduce(%s.8, %z.9), dimensions={1}, to_apply=%add.1
}
)";

// The same program: other names, no metadata, other spelling of numbers, other comment and
// whitespace, default layouts dropped, independent instructions in another order, attribute
// order changed, operand shapes omitted, no program shapes, default header values dropped, an
// unreachable computation added.
constexpr char kSameProgram[] = R"(HloModule other_name.405

unused {
  q = s32[] parameter(0)
  ROOT n = s32[] negate(q)
}

sum {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT out = f32[] add(lhs, rhs)
}

ENTRY entry /* a comment */ {
  zero = f32[] constant(0.0e0)   // reordered
  arg1 = f32[2,3] parameter(1)
  half = f32[] constant(5e-1)
  arg0 = f32[2,3] parameter(0), metadata={op_name="y" source_file="/other/host.py"}
  bcast = f32[2,3]{1,0} broadcast(half), dimensions={}
  prod = f32[2,3] multiply(arg0, bcast)
  diff = f32[2,3]{1,0} subtract(prod, arg1), sharding={replicated metadata={op_name="z"}}
  ROOT red = f32[2]{0} reduce(diff, zero), to_apply=sum, dimensions={1}
}
)";

TEST(CanonicalTest, SameProgramSameText) { EXPECT_EQ(Canon(kBase), Canon(kSameProgram)); }

// Attribute values written alike are printed once and copied after. A copy must be what the
// value's own print gives: the module's text equals that of the module with each repeat spelled
// apart (so that nothing is copied), and values that only begin alike keep their own text.
TEST(CanonicalTest, AttributeValuesWrittenAlikePrintAsEachWouldAlone) {
  struct Transpose {
    std::string dims;
    std::string shape;
    std::string sharding;
  };
  auto module = [](const std::vector<Transpose>& ts) {
    std::string text = "HloModule m\n\nENTRY e {\n  p = f32[2,3,4] parameter(0)\n";
    std::string operands, shapes;
    for (size_t i = 0; i < ts.size(); ++i) {
      const std::string name = "t" + std::to_string(i);
      text += "  " + name + " = " + ts[i].shape + " transpose(p), dimensions=" + ts[i].dims +
              ", sharding=" + ts[i].sharding + "\n";
      operands += (i ? ", " : "") + name;
      shapes += (i ? ", " : "") + ts[i].shape;
    }
    return text + "  ROOT r = (" + shapes + ") tuple(" + operands + ")\n}\n";
  };
  const std::string a = "f32[3,2,4]", b = "f32[3,4,2]", c = "f32[4,2,3]";
  const std::string dropped = "{maximal device=0 metadata={op_name=\"x\"}}";
  const std::string kept = "{maximal device=0}";
  const std::string repeated = Canon(module({{"{1,0,2}", a, dropped},
                                             {"{1,2,0}", b, kept},
                                             {"{1,0,2}", a, dropped},
                                             {"{1,2,0}", b, kept},
                                             {"{2,0,1}", c, dropped}}));
  const std::string apart =
      Canon(module({{"{1,0,2}", a, dropped},
                    {"{1,2,0}", b, kept},
                    {"{1, 0,2}", a, "{maximal device=0  metadata={op_name=\"x\"}}"},
                    {"{1,2, 0}", b, "{maximal  device=0}"},
                    {"{2,0,1}", c, "{maximal device=0 metadata={op_name=\"x\"} }"}}));
  EXPECT_EQ(repeated, apart);
  auto count = [&](std::string_view what) { return Occurrences(repeated, what); };
  EXPECT_EQ(count("dimensions={1,0,2}"), 2u);
  EXPECT_EQ(count("dimensions={1,2,0}"), 2u);
  EXPECT_EQ(count("dimensions={2,0,1}"), 1u);
  EXPECT_EQ(count("sharding={maximal device=0}"), 5u);
  EXPECT_EQ(count("metadata"), 0u);
}

// A shape whose text the parser met before is printed by copying its first printing: the
// parser marks such shapes alike (shape_text_id), and the copy must be what printing it gives.
TEST(CanonicalTest, ShapesWrittenAlikePrintAsEachWouldAlone) {
  auto module = [](const std::vector<std::string>& shapes) {
    std::string text = "HloModule m\n\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n";
    std::string operands, tuple;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const std::string name = "n" + std::to_string(i);
      text += "  " + name + " = " + shapes[i] + " negate(p)\n";
      operands += (i ? ", " : "") + name;
      tuple += (i ? ", " : "") + shapes[i];
    }
    return text + "  ROOT r = (" + tuple + ") tuple(" + operands + ")\n}\n";
  };
  const std::string a = "f32[2,3]{0,1}", b = "f32[<=2,3]", c = "f32[2,3]{1,0}";
  const std::vector<std::string> repeated = {a, b, a, c, b, a, c};
  // The same shapes, each spelled so that no two texts are alike: nothing is copied.
  const std::vector<std::string> apart = {
      a, b, "f32[2, 3]{0,1}", c, "f32[<=2, 3]", "f32[2,3]{0, 1}", "f32[2,3]{1, 0}"};
  const auto parsed = ParseModule(module(repeated), "t.hlo");
  ASSERT_THAT(parsed, IsOk());
  const std::vector<Instruction>& insts = parsed->computations[0].instructions;
  // n0 and n2 (a), n1 and n4 (b), n3 and n6 (c) share their texts; the tuple has none.
  EXPECT_GE(insts[1].shape_text_id, 0);
  EXPECT_EQ(insts[1].shape_text_id, insts[3].shape_text_id);
  EXPECT_EQ(insts[2].shape_text_id, insts[5].shape_text_id);
  EXPECT_EQ(insts[4].shape_text_id, insts[7].shape_text_id);
  EXPECT_NE(insts[1].shape_text_id, insts[2].shape_text_id);
  EXPECT_EQ(insts[8].shape_text_id, -1);
  const std::string text = Canon(module(repeated));
  EXPECT_EQ(text, Canon(module(apart)));
  auto count = [&](std::string_view what) { return Occurrences(text, what); };
  EXPECT_EQ(count("= f32[2,3]{0,1} negate("), 3u) << text;
  EXPECT_EQ(count("= f32[<=2,3] negate("), 2u) << text;
  EXPECT_EQ(count("= f32[2,3] negate("), 2u) << text;  // The default layout is dropped.
}

TEST(CanonicalTest, TextIsReadableValidHloAndIdempotent) {
  std::string once = Canon(kBase);
  EXPECT_THAT(once, HasSubstr("ROOT i"));
  EXPECT_THAT(once, HasSubstr("reduce("));
  EXPECT_EQ(Canon(once), once);
}

void ExpectDiffers(const std::string& from, const std::string& to) {
  std::string changed = kBase;
  size_t at = changed.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  changed.replace(at, from.size(), to);
  EXPECT_NE(Canon(kBase), Canon(changed)) << from << " -> " << to;
}

TEST(CanonicalTest, SensitiveToWhatTheProgramComputes) {
  ExpectDiffers("constant(0.5)", "constant(0.25)");                           // A constant.
  ExpectDiffers("f32[2,3]{1,0} parameter(1)", "f32[2,4] parameter(1)");       // A dimension.
  ExpectDiffers("subtract(%m.7, %p1.2)", "subtract(%p1.2, %m.7)");            // Operand order.
  ExpectDiffers("multiply(", "add(");                                         // Opcode.
  ExpectDiffers("dimensions={1}", "dimensions={0}");                          // An attribute.
  ExpectDiffers("sharding={replicated}", "sharding={maximal device=0}");      // Sharding.
  ExpectDiffers("f32[2,3]{1,0} parameter(1)", "f32[2,3]{0,1} parameter(1)");  // Layout.
  ExpectDiffers("f32[2,3]{1,0} parameter(1)", "bf16[2,3] parameter(1)");      // Element type.
  ExpectDiffers("ROOT %add.4 = f32[] add", "ROOT %add.4 = f32[] maximum");    // Called body.
  ExpectDiffers("HloModule SyncTensorsGraph.316, replica_count=1",
                "HloModule SyncTensorsGraph.316, replica_count=2");  // Header values.
  ExpectDiffers("parameter(0), metadata", "parameter(0), frontend_attributes={a=\"1\"}, metadata");
  ExpectDiffers("sharding={replicated}", "backend_config=\"x\"");
}

TEST(CanonicalTest, ComparisonDirectionAndRootChoiceMatter) {
  const std::string lt =
      "ENTRY e {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n"
      " ROOT c = pred[] compare(a, b), direction=LT\n}\n";
  std::string gt = lt;
  gt.replace(gt.find("LT"), 2, "GT");
  EXPECT_NE(Canon(lt), Canon(gt));
  const std::string root_a = "ENTRY e {\n ROOT a = f32[] parameter(0)\n b = f32[] negate(a)\n}\n";
  const std::string root_b = "ENTRY e {\n a = f32[] parameter(0)\n ROOT b = f32[] negate(a)\n}\n";
  EXPECT_NE(Canon(root_a), Canon(root_b));
}

TEST(CanonicalTest, ParameterNumbersMatter) {
  const std::string a =
      "ENTRY e {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n"
      " ROOT s = f32[] subtract(x, y)\n}\n";
  std::string b = a;
  b.replace(b.find("parameter(0)"), 12, "parameter(2)");
  b.replace(b.find("parameter(1)"), 12, "parameter(0)");
  b.replace(b.find("parameter(2)"), 12, "parameter(1)");
  EXPECT_NE(Canon(a), Canon(b));
}

// Found by fuzzing: printing lone punctuation next to a number (`.` `7`, `-` `1`, `/` `/`) must not
// glue them into other tokens, or the canonical text would not read back to itself.
TEST(CanonicalTest, PunctuationNeverGluesIntoOtherTokens) {
  const std::string text =
      "ENTRY e {\n ROOT a = f32[] parameter(0), backend_config={x, . 7, - 1, / / z, < =}\n}\n";
  std::string once = Canon(text);
  EXPECT_EQ(Canon(once), once);
  EXPECT_THAT(once, HasSubstr(". 7"));
  // Dropping a nested metadata={...} must not glue its neighbours together.
  const std::string nested =
      "ENTRY e {\n ROOT a = f32[] parameter(0), sharding={x=1, metadata={op_name=\"m\"} "
      "y.9}\n}\n";
  std::string first = Canon(nested);
  EXPECT_EQ(Canon(first), first);
  EXPECT_THAT(first, HasSubstr("x=1 y.9"));
  // A default layout spelled with leading zeros inside a value is still the default.
  const std::string zeros =
      "ENTRY e {\n ROOT a = f32[] parameter(0), outfeed_shape=f32[2,8]{1,00}\n}\n";
  std::string z = Canon(zeros);
  EXPECT_EQ(Canon(z), z);
  EXPECT_THAT(z, HasSubstr("outfeed_shape=f32[2,8]\n"));
  // And one spelled with a float that prints as an integer (fuzzer finding: the first round
  // kept `{1,0.}`, printed as `{1,0}`, which the second round dropped).
  const std::string dotted =
      "ENTRY e {\n ROOT a = f32[] parameter(0), outfeed_shape=(f32[1,4]{1,0.})\n}\n";
  std::string d = Canon(dotted);
  EXPECT_EQ(Canon(d), d);
  EXPECT_THAT(d, HasSubstr("outfeed_shape=(f32[1,4])\n"));
  // A float -0.0 in a value prints as -0, which reads back as an integer and must keep its
  // sign there (fuzzer finding).
  const std::string negative_zero =
      "ENTRY e {\n ROOT a = f32[] parameter(0), outfeed_shape=(f32[1]{-0.0 . F})\n}\n";
  std::string nz = Canon(negative_zero);
  EXPECT_EQ(Canon(nz), nz);
  EXPECT_THAT(nz, HasSubstr("{-0 . F}"));
  // Integers in values print as AppendCanonicalNumber spells them, whether or not they are
  // written that way already: leading zeros and hex respelled, -0 kept, the widest that fit
  // 64 bits as written, wider ones as written.
  const std::string integers = Canon(
      "ENTRY e {\n ROOT a = f32[] parameter(0), sharding={devices=[007,0x10,0,-0,-12,"
      "1234567890123456789,12345678901234567890,99999999999999999999]}\n}\n");
  EXPECT_EQ(Canon(integers), integers);
  EXPECT_THAT(integers, HasSubstr("devices=[7,16,0,-0,-12,1234567890123456789,"
                                  "12345678901234567890,99999999999999999999]"));
  // A number is spaced by what its respelling reads back as: `0.` prints as the integer `0`,
  // which needs no space after `...` (fuzzer finding: the rounds printed `... 0`, then `...0`).
  std::string ellipsis =
      Canon("ENTRY e {\n ROOT a = f32[] parameter(0), replica_groups=[...0.]\n}\n");
  EXPECT_EQ(Canon(ellipsis), ellipsis);
  EXPECT_THAT(ellipsis, HasSubstr("replica_groups=[...0]"));
  // A channel id that is not a whole integer is printed, not renumbered; a frontend_attributes
  // value that is not one brace group is printed as written (fuzzer findings).
  for (const char* module :
       {"ENTRY e {\n ROOT a = f32[] parameter(0), channel_id=.1\n}\n",
        "ENTRY e {\n ROOT a = f32[] parameter(0), channel_id=.0\n}\n",
        "ENTRY e {\n ROOT a = f32[] constant(4), frontend_attributes={l#,s,d}{}\n}\n"}) {
    std::string c = Canon(module);
    EXPECT_EQ(Canon(c), c) << module;
  }
  // `%metadata={...}` in a value is dropped like `metadata={...}`, which is how it prints.
  std::string percent_metadata =
      Canon("ENTRY e {\n ROOT a = f32[] parameter(0), sharding={{%metadata={}}}\n}\n");
  EXPECT_EQ(Canon(percent_metadata), percent_metadata);
  EXPECT_THAT(percent_metadata, Not(HasSubstr("metadata")));
  // A default layout followed by another group is kept: dropped, the group would read as the
  // layout in the next round (fuzzer finding).
  std::string twice =
      Canon("ENTRY e {\n ROOT a = f32[] parameter(0), outfeed_shape={f32[1,0]{1,0}{1,0}}\n}\n");
  EXPECT_EQ(Canon(twice), twice);
  EXPECT_THAT(twice, HasSubstr("f32[1,0]{1,0}{1,0}"));
  // A name before `...` would take its dots in (names may hold dots): they are spaced apart
  // (fuzzer finding: `n ...` printed as `n...`, which reads back as one name).
  for (const char* value : {"[{n ...\"\"}]", "[{1 ...}]", "[{2.5 ...}]"}) {
    std::string v = Canon(std::string("ENTRY e {\n ROOT a = f32[] parameter(0), replica_groups=") +
                          value + "\n}\n");
    EXPECT_EQ(Canon(v), v) << value;
  }
  // A default header value is recognized however its number is spelled (fuzzer finding:
  // `replica_count=1.` was kept and printed as `=1`, which the next round dropped).
  for (const char* header : {"HloModule m, replica_count=1.\n", "HloModule m, replica_count=01\n",
                             "HloModule m, num_partitions=1.0\n"}) {
    std::string h = Canon(std::string(header) + "ENTRY e {\n ROOT a = f32[] parameter(0)\n}\n");
    EXPECT_EQ(Canon(h), h) << header;
    EXPECT_THAT(h, Not(HasSubstr("replica_count"))) << header;
    EXPECT_THAT(h, Not(HasSubstr("num_partitions"))) << header;
  }
  // '%' is dropped when printed, so a '%'-prefixed shape is normalized like a plain one
  // (fuzzer finding: otherwise the second round dropped the layout the first one kept).
  const std::string percent =
      "ENTRY e {\n ROOT a = f32[] parameter(0), outfeed_shape=(f32[3]{0},%f32[3]{0})\n}\n";
  std::string p = Canon(percent);
  EXPECT_EQ(Canon(p), p);
  EXPECT_THAT(p, HasSubstr("outfeed_shape=(f32[3],f32[3])\n"));
  // Whether a value holds a shape must not depend on number spelling: `16.` prints as `16`
  // (fuzzer finding), and junk between the brackets is never a shape.
  for (const char* value :
       {"f32[16.]{0}", "f32[16 . dd4]{1,0}", "f32[16,,4]{1,0}", "f32[<=8,?]{1,0}"}) {
    std::string v = Canon(std::string("ENTRY e {\n ROOT a = f32[] parameter(0), outfeed_shape=") +
                          value + "\n}\n");
    EXPECT_EQ(Canon(v), v) << value;
  }
  EXPECT_THAT(Canon("ENTRY e {\n ROOT a = f32[] parameter(0), outfeed_shape=f32[16.]{0}\n}\n"),
              HasSubstr("outfeed_shape=f32[16]\n"));
  // A dropped metadata takes the comma before it and that comma's space (fuzzer finding).
  std::string spaced =
      Canon("ENTRY e {\n ROOT a = f32[] parameter(0), backend_config={x ? , metadata={} y}\n}\n");
  EXPECT_EQ(Canon(spaced), spaced);
  // `%ROOT` after a group is not part of the value either: it would print as `ROOT`.
  EXPECT_FALSE(
      ParseModule("ENTRY e {\n a = f32[] parameter(0), backend_config={}\n %ROOT b = "
                  "f32[] negate(a)\n}\n",
                  "t.hlo"));
}

TEST(CanonicalTest, NumbersAreRespelledPerElementType) {
  auto lit = [](const std::string& type, const std::string& value) {
    std::string c = Canon("ENTRY e {\n ROOT c = " + type + " constant(" + value + ")\n}\n");
    size_t open = c.find("constant(");
    return c.substr(open + 9, c.find(')', open) - open - 9);
  };
  EXPECT_EQ(lit("f32[]", "1"), lit("f32[]", "1.0"));
  EXPECT_EQ(lit("f32[]", "1e0"), "1");
  EXPECT_EQ(lit("f32[]", "0.1"), lit("f32[]", "0.100000001"));  // Same f32 value.
  EXPECT_NE(lit("f64[]", "0.1"), lit("f64[]", "0.100000001"));  // Different f64 values.
  EXPECT_EQ(lit("bf16[]", "1.00390625"), "1");                  // Rounds to even in bf16.
  EXPECT_EQ(lit("f16[]", "65519"), "65504");
  EXPECT_EQ(lit("f16[]", "65520"), "inf");
  EXPECT_EQ(lit("f32[]", "-0"), "-0");
  EXPECT_EQ(lit("f32[]", "-nan"), "-nan");
  EXPECT_EQ(lit("s32[]", "007"), "7");
  EXPECT_EQ(lit("pred[]", "1"), "true");
  EXPECT_EQ(lit("u64[]", "18446744073709551615"), "18446744073709551615");
  EXPECT_EQ(lit("f32[2,2]", "{ { 1.0, 2 }, {3e0, 4} }"), "{{1,2},{3,4}}");
}

TEST(CanonicalTest, ChannelIdsAreRenumberedButPairingKept) {
  auto module = [](int a, int b, int c, int d) {
    return "ENTRY e {\n t = token[] after-all()\n"
           " s1 = (f32[], u32[], token[]) send(f32[] constant(1), t), channel_id=" +
           std::to_string(a) + "\n sd1 = token[] send-done(s1), channel_id=" + std::to_string(b) +
           "\n s2 = (f32[], u32[], token[]) send(f32[] constant(2), t), channel_id=" +
           std::to_string(c) +
           "\n ROOT sd2 = token[] send-done(s2), channel_id=" + std::to_string(d) + "\n}\n";
  };
  EXPECT_EQ(Canon(module(1, 1, 2, 2)), Canon(module(7, 7, 3, 3)));
  EXPECT_NE(Canon(module(1, 1, 2, 2)), Canon(module(1, 2, 2, 1)));
}

TEST(CanonicalTest, ControlPredecessorsMatterButNotTheirListOrder) {
  const std::string base =
      "ENTRY e {\n a = f32[] parameter(0)\n b = f32[] negate(a)\n"
      " c = f32[] exponential(a)\n ROOT d = f32[] add(a, a)";
  EXPECT_NE(Canon(base + "\n}\n"), Canon(base + ", control-predecessors={b}\n}\n"));
  EXPECT_EQ(Canon(base + ", control-predecessors={b,c}\n}\n"),
            Canon(base + ", control-predecessors={c,b}\n}\n"));
}

TEST(CanonicalTest, ScheduledModulesKeepTextualOrder) {
  const std::string xy = " x = f32[] parameter(0)\n y = f32[] parameter(1)\n";
  const std::string yx = " y = f32[] parameter(1)\n x = f32[] parameter(0)\n";
  auto module = [](const std::string& header, const std::string& params) {
    return header + "\nENTRY e {\n" + params + " ROOT t = (f32[], f32[]) tuple(x, y)\n}\n";
  };
  const std::string scheduled = "HloModule m, is_scheduled=true";
  EXPECT_NE(Canon(module(scheduled, xy)), Canon(module(scheduled, yx)));
  EXPECT_EQ(Canon(module("HloModule m", xy)), Canon(module("HloModule m", yx)));
}

TEST(CanonicalTest, ElidedConstantsNeedExplicitConsent) {
  auto m = ParseModule("ENTRY e {\n ROOT c = f32[1000] constant({...})\n}\n", "w.hlo");
  ASSERT_THAT(m, IsOk());
  EXPECT_THAT(Canonicalize(*m), StatusIs(StatusCode::kFailedPrecondition,
                                         HasSubstr("w.hlo:2:2: error: constant has elided")));
  EXPECT_THAT(Canonicalize(*m, {.allow_elided_constants = true}), IsOk());
}

TEST(CanonicalTest, SourceLinesMapBack) {
  auto m = ParseModule(kBase, "t.hlo");
  ASSERT_THAT(m, IsOk());
  auto c = Canonicalize(*m, {.record_source_lines = true});
  ASSERT_THAT(c, IsOk());
  // Find the canonical multiply line; its source is line 14 of kBase.
  size_t line = 0, pos = 0;
  while (true) {
    size_t end = c->text.find('\n', pos);
    if (c->text.substr(pos, end - pos).find("multiply") != std::string::npos) break;
    pos = end + 1;
    ++line;
  }
  EXPECT_EQ(c->source_lines.at(line), 14u);
}

// Collects what a CanonicalTextSink is given.
class CollectingSink final : public CanonicalTextSink {
 public:
  void Begin(uint64_t text_bytes) override {
    ++begins;
    told = text_bytes;
  }
  void Append(std::string_view piece) override {
    if (begins == 0) appended_before_begin = true;
    largest_piece = std::max(largest_piece, piece.size());
    text.append(piece);
  }
  int begins = 0;
  uint64_t told = 0;
  bool appended_before_begin = false;
  size_t largest_piece = 0;
  std::string text;
};

// A module whose canonical lines hold every kind of reference with numbers of one to four
// digits: hundreds of instructions, a dozen channels, callees bare and braced, control
// predecessors, an execution thread, header attributes.
std::string ModuleWithEveryReference() {
  std::string text =
      "HloModule m, entry_computation_layout={(f32[])->f32[]}, "
      "frontend_attributes={b=\"2\",a=\"1\"}\n\n"
      "add {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y)\n}\n\n"
      "neg {\n x = f32[] parameter(0)\n ROOT n = f32[] negate(x)\n}\n\n"
      "other {\n x = f32[] parameter(0)\n ROOT n = f32[] exponential(x)\n}, "
      "execution_thread=\"side\"\n\n"
      "ENTRY e {\n p = f32[] parameter(0)\n t = token[] after-all()\n";
  std::string last = "p";
  for (int k = 0; k < 4000; ++k) {
    const std::string name = "v" + std::to_string(k);
    text += " " + name + " = f32[] add(" + last + ", p)";
    if (k % 97 == 5) text += ", control-predecessors={t}";
    text += "\n";
    last = name;
  }
  for (int k = 0; k < 12; ++k) {
    const std::string c = std::to_string(100 + 7 * k);
    text += " s" + std::to_string(k) + " = (f32[], u32[], token[]) send(" + last +
            ", t), channel_id=" + c + "\n d" + std::to_string(k) + " = token[] send-done(s" +
            std::to_string(k) + "), channel_id=" + c + "\n";
  }
  text +=
      " i = s32[] constant(1)\n"
      " c = f32[] conditional(i, " +
      last + ", " + last +
      "), branch_computations={neg, other}\n"
      " r = f32[] reduce(c, p), dimensions={}, to_apply=add\n"
      " ROOT out = f32[] add(r, c), control-predecessors={d11, d3}\n}\n";
  return text;
}

TEST(CanonicalTest, ASinkIsToldTheTextsLengthThenGivenTheTextInBoundedPieces) {
  auto m = ParseModule(ModuleWithEveryReference(), "t.hlo");
  ASSERT_THAT(m, IsOk());
  for (bool lines : {false, true}) {
    auto whole = Canonicalize(*m, {.record_source_lines = lines});
    ASSERT_THAT(whole, IsOk());
    ASSERT_THAT(whole->text, HasSubstr("i4000 = "));
    ASSERT_THAT(whole->text, HasSubstr("channel_id=12"));
    ASSERT_THAT(whole->text, HasSubstr("branch_computations={c"));
    ASSERT_THAT(whole->text, HasSubstr("execution_thread=\"side\""));
    CollectingSink sink;
    auto streamed = Canonicalize(*m, {.record_source_lines = lines, .text_sink = &sink});
    ASSERT_THAT(streamed, IsOk());
    EXPECT_EQ(streamed->text, "");  // Not held.
    EXPECT_EQ(sink.begins, 1);
    EXPECT_FALSE(sink.appended_before_begin);
    EXPECT_EQ(sink.told, whole->text.size());
    EXPECT_EQ(sink.text, whole->text);
    EXPECT_EQ(streamed->source_lines, whole->source_lines);
    // The module's text is larger than one piece, so that the pieces were bounded.
    ASSERT_GT(whole->text.size(), size_t{100} << 10);
    EXPECT_LT(sink.largest_piece, size_t{80} << 10);
  }
}

// A builder that prints computations' lines ahead (as it does following a parser) streams the
// text Canonicalize prints: callee and channel numbers put in at their holes, in printing order.
TEST(CanonicalTest, LinesPrintedAheadStreamTheTextCanonicalizePrints) {
  auto m = ParseModule(ModuleWithEveryReference(), "t.hlo");
  ASSERT_THAT(m, IsOk());
  auto whole = Canonicalize(*m);
  ASSERT_THAT(whole, IsOk());
  // Every computation ahead, every other one, and none.
  for (const int every : {1, 2, 0}) {
    CollectingSink sink;
    CanonicalBuilder builder(*m, {.text_sink = &sink});
    for (size_t c = 0; c < m->computations.size(); ++c) {
      const Computation& comp = m->computations[c];
      builder.StartComputation();
      builder.AddInstructions(comp.instructions.data(), 0,
                              static_cast<uint32_t>(comp.instructions.size()));
      builder.FinishComputation(comp.root, comp.execution_thread, every != 0 && c % every == 0);
    }
    auto streamed = builder.Finish(*m);
    ASSERT_THAT(streamed, IsOk()) << "every " << every;
    EXPECT_EQ(sink.told, whole->text.size()) << "every " << every;
    EXPECT_EQ(sink.text, whole->text) << "every " << every;
    EXPECT_LT(sink.largest_piece, size_t{80} << 10) << "every " << every;
  }
}

// The lines of the computation finished last, printed by two threads at once (the builder's
// PrintSharedFromBack taking runs of them from the back, Finish from the front), stream the text
// Canonicalize prints wherever the two threads meet: the callee, channel and control numbers of
// the back's lines put in, its runs in the text's order.
TEST(CanonicalTest, SharedLinesStreamTheTextCanonicalizePrints) {
  auto m = ParseModule(ModuleWithEveryReference(), "t.hlo");
  ASSERT_THAT(m, IsOk());
  auto whole = Canonicalize(*m);
  ASSERT_THAT(whole, IsOk());
  const size_t last = m->computations.size() - 1;
  ASSERT_EQ(static_cast<int32_t>(last), m->entry);
  ASSERT_GT(m->computations[last].instructions.size(), 4000u);
  // Runs of one line, of a few, of the default's, and one run for all of them.
  for (const size_t run_lines : {size_t{1}, size_t{7}, size_t{512}, size_t{100000}}) {
    // The back beside Finish on another thread, and the back alone before Finish starts; the
    // computations ordered by Finish (the back leaves holes for callee numbers) or before the
    // back prints (it prints them).
    for (const auto& [back_first, order_ahead] :
         {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
      const std::string what = "runs of " + std::to_string(run_lines) +
                               (back_first ? ", back first" : ", beside") +
                               (order_ahead ? ", ordered ahead" : "");
      CollectingSink sink;
      CanonicalBuilder builder(
          *m, {.text_sink = &sink, .shared_print_lines = 1, .shared_run_lines = run_lines});
      for (size_t c = 0; c < m->computations.size(); ++c) {
        const Computation& comp = m->computations[c];
        builder.StartComputation();
        builder.AddInstructions(comp.instructions.data(), 0,
                                static_cast<uint32_t>(comp.instructions.size()));
        // Some computations printed ahead, as a builder following a parser prints them.
        const bool shared = builder.FinishComputation(comp.root, comp.execution_thread,
                                                      /*print_ahead=*/c == 1, c == last);
        EXPECT_EQ(shared, c == last) << what;
      }
      if (order_ahead) builder.OrderComputationsAhead(m->entry, m->computations.size());
      Result<CanonicalModule> streamed = Error(Internal("not run"));
      if (back_first) {
        builder.PrintSharedFromBack();
        streamed = builder.Finish(*m);
      } else {
        std::thread back([&builder] { builder.PrintSharedFromBack(); });
        streamed = builder.Finish(*m);
        back.join();
      }
      ASSERT_THAT(streamed, IsOk()) << what;
      EXPECT_EQ(sink.told, whole->text.size()) << what;
      EXPECT_EQ(sink.text, whole->text) << what;
      EXPECT_LT(sink.largest_piece, size_t{80} << 10) << what;
    }
  }
}

// Lines are shared only where the text is streamed without source lines, and the computation
// has as many lines as asked; otherwise Finish prints them alone, as before.
TEST(CanonicalTest, LinesAreSharedOnlyWhenStreamedWithoutSourceLinesAndMany) {
  auto m = ParseModule(ModuleWithEveryReference(), "t.hlo");
  ASSERT_THAT(m, IsOk());
  const size_t lines = m->computations.back().instructions.size();
  CollectingSink sink;
  struct Case {
    CanonicalOptions options;
    bool shared;
  };
  const Case cases[] = {
      {{.text_sink = &sink, .shared_print_lines = lines}, true},
      {{.text_sink = &sink, .shared_print_lines = lines + 1}, false},
      {{.record_source_lines = true, .text_sink = &sink, .shared_print_lines = 1}, false},
      {{.shared_print_lines = 1}, false},  // The text held whole.
  };
  for (const Case& c : cases) {
    sink = CollectingSink();
    CanonicalBuilder builder(*m, c.options);
    bool shared = false;
    for (const Computation& comp : m->computations) {
      builder.StartComputation();
      builder.AddInstructions(comp.instructions.data(), 0,
                              static_cast<uint32_t>(comp.instructions.size()));
      shared = builder.FinishComputation(comp.root, comp.execution_thread, false, true);
    }
    EXPECT_EQ(shared, c.shared) << c.options.shared_print_lines;
    if (shared) builder.PrintSharedFromBack();
    auto canonical = builder.Finish(*m);
    ASSERT_THAT(canonical, IsOk());
    auto whole = Canonicalize(*m, {.record_source_lines = c.options.record_source_lines});
    ASSERT_THAT(whole, IsOk());
    EXPECT_EQ(c.options.text_sink != nullptr ? sink.text : canonical->text, whole->text);
  }
}

// Computations ordered ahead from the wrong entry fail Finish rather than print another text;
// a count that is not the number of computations finished orders nothing (Finish orders them).
TEST(CanonicalTest, ComputationsOrderedAheadMustBeTheModulesAll) {
  auto m = ParseModule(ModuleWithEveryReference(), "t.hlo");
  ASSERT_THAT(m, IsOk());
  auto whole = Canonicalize(*m);
  ASSERT_THAT(whole, IsOk());
  const auto build = [&](CanonicalBuilder& builder) {
    for (const Computation& comp : m->computations) {
      builder.StartComputation();
      builder.AddInstructions(comp.instructions.data(), 0,
                              static_cast<uint32_t>(comp.instructions.size()));
      builder.FinishComputation(comp.root, comp.execution_thread);
    }
  };
  CollectingSink sink;
  CanonicalBuilder wrong_entry(*m, {.text_sink = &sink});
  build(wrong_entry);
  wrong_entry.OrderComputationsAhead(0, m->computations.size());
  EXPECT_THAT(wrong_entry.Finish(*m), StatusIs(StatusCode::kInternal, HasSubstr("entry")));
  // Not ordered ahead: a count that is not the computations', or a text held whole.
  for (const bool streamed : {true, false}) {
    sink = CollectingSink();
    CanonicalBuilder not_ahead(*m, {.text_sink = streamed ? &sink : nullptr});
    build(not_ahead);
    not_ahead.OrderComputationsAhead(m->entry, m->computations.size() + (streamed ? 1 : 0));
    auto text = not_ahead.Finish(*m);
    ASSERT_THAT(text, IsOk());
    EXPECT_EQ(streamed ? sink.text : text->text, whole->text);
  }
}

TEST(CanonicalTest, ASinkIsToldNothingWhenTheModuleIsRefused) {
  auto m = ParseModule("ENTRY e {\n ROOT c = f32[1000] constant({...})\n}\n", "w.hlo");
  ASSERT_THAT(m, IsOk());
  CollectingSink sink;
  EXPECT_THAT(Canonicalize(*m, {.text_sink = &sink}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("elided")));
  EXPECT_EQ(sink.begins, 0);
  EXPECT_EQ(sink.text, "");
}

}  // namespace
}  // namespace hlocache::hlo
