#include "compiler/hlo/parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "compiler/hlo/attributes.h"
#include "compiler/hlo/canonical.h"
#include "compiler/hlo/shape.h"

#include "tests/unit/status_matchers.h"

namespace hlocache::hlo {
namespace {

using ::testing::HasSubstr;

constexpr char kModule[] = R"(HloModule m.1, entry_computation_layout={(f32[4]{0})->f32[]}

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main.3 (p: f32[4]) -> f32[] {
  %p = f32[4]{0} parameter(0), metadata={op_name="x" source_file="/a/b.py" source_line=1}
  %zero = f32[] constant(0)
  ROOT %r = f32[] reduce(%p, %zero), dimensions={0}, to_apply=%sum
}
)";

TEST(ParserTest, BuildsAWalkableModule) {
  auto m = ParseModule(kModule, "m.hlo");
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ(m->name, "m.1");
  ASSERT_EQ(m->computations.size(), 2u);
  EXPECT_EQ(m->entry, 1);
  const Computation& entry = m->computations[1];
  EXPECT_EQ(entry.name, "main.3");
  ASSERT_EQ(entry.instructions.size(), 3u);
  const Instruction& reduce = entry.instructions[entry.root];
  EXPECT_EQ(reduce.opcode.opcode, Opcode::kReduce);
  EXPECT_EQ(reduce.operands, (std::vector<int32_t>{0, 1}));
  EXPECT_THAT(reduce.callees, ::testing::ElementsAre(0));
  ASSERT_NE(reduce.FindAttribute("dimensions"), nullptr);
  EXPECT_EQ(*m->IntList(*reduce.FindAttribute("dimensions")), (std::vector<int64_t>{0}));
  EXPECT_EQ(entry.parameters, (std::vector<int32_t>{0}));
  EXPECT_EQ(entry.instructions[0].shape.dims, (std::vector<int64_t>{4}));
  ASSERT_TRUE(m->entry_computation_layout.has_value());
  EXPECT_EQ(m->entry_computation_layout->parameters.size(), 1u);
}

// Shapes the text leaves out are inferred where the operands imply them (XLA's parser does the
// same); the canonical text keeps to what was written.
TEST(ParserTest, AttributesCarryTheRoleTheirNameGivesThem) {
  auto m = ParseModule(R"(HloModule m
%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}
ENTRY %e {
  %p = f32[4] parameter(0), metadata={op_name="p"}, statistics={visualizing_index=1}
  %r = f32[] reduce(%p, f32[] constant(0)), dimensions={0}, to_apply=%add, backend_config="x"
  %a = f32[4] all-reduce(%p), channel_id=1, to_apply=%add, frontend_attributes={k="v"}
  ROOT %t = (f32[], f32[4]) tuple(%r, %a), control-predecessors={%r}, origin={{"o"}}
}
)",
                       "m.hlo");
  ASSERT_THAT(m, IsOk());
  std::map<std::string, AttributeRole> roles;
  for (const Instruction& inst : m->computations[m->entry].instructions) {
    for (const Attribute& a : inst.attributes) {
      roles[std::string(a.name)] = a.role;
      EXPECT_EQ(a.role, InstructionAttributeRole(a.name)) << a.name;
    }
  }
  EXPECT_EQ(roles["metadata"], AttributeRole::kDebugOnly);
  EXPECT_EQ(roles["statistics"], AttributeRole::kDebugOnly);
  EXPECT_EQ(roles["origin"], AttributeRole::kDebugOnly);
  EXPECT_EQ(roles["to_apply"], AttributeRole::kCallee);
  EXPECT_EQ(roles["control-predecessors"], AttributeRole::kControlPredecessors);
  EXPECT_EQ(roles["channel_id"], AttributeRole::kChannelId);
  EXPECT_EQ(roles["frontend_attributes"], AttributeRole::kFrontendAttributes);
  EXPECT_EQ(roles["backend_config"], AttributeRole::kBackendConfig);
  EXPECT_EQ(roles["dimensions"], AttributeRole::kOther);
}

TEST(ParserTest, OneLookupGivesEachKnownAttributesRoleAndRefusesOthers) {
  // The parser asks KnownInstructionAttributeRole alone: it must answer as the two questions it
  // stands for, for every name instructions may carry and for names they may not.
  const std::span<const std::string_view> names = InstructionAttributeNames();
  ASSERT_GT(names.size(), 50u);
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(InstructionAttributeIndex(names[i]), static_cast<int>(i)) << names[i];
    const std::optional<AttributeRole> role = KnownInstructionAttributeRole(names[i]);
    ASSERT_TRUE(role.has_value()) << names[i];
    EXPECT_EQ(*role, InstructionAttributeRole(names[i])) << names[i];
  }
  for (std::string_view unknown : {"", "x", "dimension", "dimensionsx", "Metadata", "to-apply",
                                   "control_predecessors", "entry_computation_layout"}) {
    EXPECT_FALSE(IsKnownInstructionAttribute(unknown)) << unknown;
    EXPECT_FALSE(KnownInstructionAttributeRole(unknown).has_value()) << unknown;
  }
}

// Instructions' attributes live in the Module, in blocks: every instruction must keep its own,
// across block boundaries and after the Module moves.
TEST(ParserTest, EachInstructionKeepsItsOwnAttributesAcrossBlocksAndMoves) {
  constexpr int kInstructions = 3000;  // Two attributes each: 6000, more than one block holds.
  std::string text = "HloModule m\nENTRY %e {\n  %p = s32[64] parameter(0)\n";
  for (int i = 0; i < kInstructions; ++i) {
    text += "  %s" + std::to_string(i) + " = s32[1] slice(%p), slice={[" + std::to_string(i % 64) +
            ":" + std::to_string(i % 64 + 1) + "]}, metadata={op_name=\"n" + std::to_string(i) +
            "\"}\n";
  }
  text += "  ROOT %t = s32[1] copy(%s0)\n}\n";
  auto parsed = ParseModule(text, "m.hlo");
  ASSERT_THAT(parsed, IsOk());
  const Attribute* first = parsed->computations[0].instructions[1].attributes.data();
  Module m = std::move(*parsed);
  const Computation& entry = m.computations[0];
  ASSERT_EQ(entry.instructions.size(), static_cast<size_t>(kInstructions) + 2);
  EXPECT_EQ(entry.instructions[1].attributes.data(), first);  // Not copied by the move.
  EXPECT_TRUE(entry.instructions[0].attributes.empty());
  for (int i = 0; i < kInstructions; ++i) {
    const Instruction& inst = entry.instructions[static_cast<size_t>(i) + 1];
    ASSERT_EQ(inst.attributes.size(), 2u) << i;
    EXPECT_EQ(inst.attributes[0].name, "slice");
    EXPECT_EQ(inst.attributes[0].role, AttributeRole::kOther);
    const std::string lower = std::to_string(i % 64);
    EXPECT_EQ(m.TokenText(inst.attributes[0].value.begin + 2), lower) << i;
    EXPECT_EQ(inst.attributes[1].name, "metadata");
    ASSERT_NE(inst.FindAttribute("metadata"), nullptr);
    EXPECT_EQ(m.TokenText(inst.FindAttribute("metadata")->value.begin + 3),
              "\"n" + std::to_string(i) + "\"")
        << i;
  }
}

TEST(ParserTest, InfersTheShapesTheOperandsImply) {
  auto m = ParseModule(R"(
double {
  a = f64[3] parameter(0)
  ROOT d = add(a, a)
}

ENTRY e {
  p0 = f64[3] parameter(0)
  p1 = f64[3] parameter(1)
  s = add(p0, p1)
  lt = compare(s, p1), direction=LT
  c = call(s), to_apply=double
  t = tuple(s, lt, c)
  g = get-tuple-element(t), index=1
  b = broadcast(p0), dimensions={0}
  ROOT r = (f64[3], pred[3], f64[3], pred[3]) tuple(s, lt, c, g)
})",
                       "i.hlo");
  ASSERT_THAT(m, IsOk());
  const Computation& e = m->computations[1];
  auto shape = [&](size_t i) { return CanonicalShapeText(e.instructions[i].shape); };
  EXPECT_TRUE(e.instructions[2].shape_inferred);
  EXPECT_FALSE(e.instructions[2].shape_written);
  EXPECT_EQ(shape(2), "f64[3]");                     // s
  EXPECT_EQ(shape(3), "pred[3]");                    // lt
  EXPECT_EQ(shape(4), "f64[3]");                     // c: the callee's root, itself inferred
  EXPECT_EQ(shape(5), "(f64[3], pred[3], f64[3])");  // t
  EXPECT_EQ(shape(6), "pred[3]");                    // g
  EXPECT_FALSE(e.instructions[7].has_shape());       // b: a broadcast's is not implied
  // The key's text is what was written: no inferred shape in it.
  auto canonical = Canonicalize(*m);
  ASSERT_THAT(canonical, IsOk());
  EXPECT_EQ(canonical->text.find("f64[3] add"), std::string::npos) << canonical->text;
  // Operands of different shapes imply nothing.
  auto mixed = ParseModule(
      "ENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[3] parameter(1)\n"
      "  ROOT s = add(a, b)\n}\n",
      "x.hlo");
  ASSERT_THAT(mixed, IsOk());
  EXPECT_FALSE(mixed->computations[0].instructions[2].has_shape());
}

TEST(ParserTest, AcceptsShortParsableStyleAndNestedOperands) {
  auto m = ParseModule(R"(ENTRY e {
  x = f32[2] parameter(0)
  y = (f32[2], s32[]) tuple(x, s32[] constant(3))
  ROOT g = f32[2] get-tuple-element(y), index=0
})",
                       "s.hlo");
  ASSERT_THAT(m, IsOk());
  // The nested constant became an instruction of its own, before its user.
  EXPECT_EQ(m->computations[0].instructions.size(), 4u);
  EXPECT_EQ(m->computations[0].instructions[1].opcode.opcode, Opcode::kConstant);
}

// An instruction is parsed in its place at the computation's end; an operand written as an
// instruction of its own must come before its user, wherever in the operands it stands and
// however deep, with the user's attributes, name and ROOT still its own.
TEST(ParserTest, NestedOperandsComeBeforeTheirUserWhereverTheyAreWritten) {
  auto m = ParseModule(R"(ENTRY e {
  x = f32[] parameter(0)
  a = f32[] add(x, f32[] multiply(x, f32[] negate(x))), metadata={op_name="a"}
  b = f32[] add(f32[] abs(x), a)
  ROOT r = f32[] subtract(b, a), control-predecessors={a}
})",
                       "n.hlo");
  ASSERT_THAT(m, IsOk());
  const auto& insts = m->computations[0].instructions;
  std::vector<std::string> order;
  for (const Instruction& inst : insts) {
    std::string line = std::string(inst.name.empty() ? "-" : inst.name) + "(";
    for (int32_t o : inst.operands) line += std::to_string(o) + ",";
    line += ")";
    if (!inst.attributes.empty()) line += " " + std::string(inst.attributes[0].name);
    order.push_back(line);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"x()", "-(0,)", "-(0,1,)", "a(0,2,) metadata", "-(0,)",
                                             "b(4,3,)", "r(5,3,) control-predecessors"}));
  EXPECT_EQ(insts[1].opcode.opcode, Opcode::kNegate);
  EXPECT_EQ(insts[4].opcode.opcode, Opcode::kAbs);
  EXPECT_EQ(m->computations[0].root, 6);
  EXPECT_THAT(insts[6].control_predecessors, ::testing::ElementsAre(3));

  // Errors after the second parse are reported as they were: where and what.
  EXPECT_THAT(ParseModule("ENTRY e {\n  x = f32[] parameter(0)\n"
                          "  ROOT y = f32[] add(f32[] negate(x), %z)\n}\n",
                          "n.hlo"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("n.hlo:3:39: error: undefined operand '%z'")));
  EXPECT_THAT(ParseModule("ENTRY e {\n  x = f32[] parameter(0)\n"
                          "  x = f32[] add(f32[] negate(x), x)\n  ROOT y = f32[] negate(x)\n}\n",
                          "n.hlo"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("duplicate instruction name 'x'")));
}

TEST(ParserTest, ShapesLayoutsTuplesAndDynamicDims) {
  auto m = ParseModule(R"(ENTRY e {
  a = f32[8,128]{1,0:T(8,128)} parameter(0)
  b = s32[<=4,?] parameter(1)
  ROOT t = (f32[8,128]{0,1}, (pred[], token[])) tuple(a, a)
})",
                       "s.hlo");
  ASSERT_THAT(m, IsOk());
  const auto& insts = m->computations[0].instructions;
  ASSERT_TRUE(insts[0].shape.layout.has_value());
  EXPECT_EQ(insts[0].shape.layout->Details(), "T(8,128)");
  EXPECT_FALSE(insts[0].shape.HasDefaultLayout());
  EXPECT_TRUE(insts[1].shape.IsDynamicDim(0));
  EXPECT_EQ(insts[1].shape.dims[1], Shape::kUnboundedDim);
  EXPECT_TRUE(insts[2].shape.IsTuple());
  EXPECT_EQ(CanonicalShapeText(insts[2].shape), "(f32[8,128]{0,1}, (pred[], token[]))");
}

// Integers (dimensions, layouts, parameter numbers) read the same whatever their length: short
// ones on the parser's in-line path, long ones through the library, one past int64 an error.
TEST(ParserTest, IntegersReadAsDecimalWhateverTheirLength) {
  auto dimension = [](std::string_view number) -> Result<int64_t> {
    auto m = ParseModule(
        "ENTRY e {\n  ROOT p = f32[007," + std::string(number) + "]{0,01} parameter(00)\n}\n",
        "i.hlo");
    if (!m) return Error(m.error());
    const Instruction& p = m->computations[0].instructions[0];
    EXPECT_EQ(p.parameter_number, 0);
    EXPECT_EQ(p.shape.layout->minor_to_major, (SmallVector<int8_t, 8>{0, 1}));
    EXPECT_EQ(p.shape.dims[0], 7);
    return p.shape.dims[1];
  };
  EXPECT_THAT(dimension("0"), IsOkAndHolds(0));
  EXPECT_THAT(dimension("000000000000000042"), IsOkAndHolds(42));
  EXPECT_THAT(dimension("999999999999999999"), IsOkAndHolds(999999999999999999));    // 18 digits.
  EXPECT_THAT(dimension("1000000000000000000"), IsOkAndHolds(1000000000000000000));  // 19.
  EXPECT_THAT(dimension("9223372036854775807"),
              IsOkAndHolds(9223372036854775807));  // int64's most.
  EXPECT_THAT(dimension("9223372036854775808"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("integer out of range")));
  EXPECT_THAT(dimension("0x10"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("integer out of range")));
  EXPECT_THAT(dimension("-3"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("negative dimension size")));
}

TEST(ParserTest, AShapeHasAtMostSixtyFourDimensionsEachKeptInOrder) {
  // Dimensions are gathered in a fixed array of 64 before the shape takes them: the 64th is
  // kept, the 65th is an error, not a write past it.
  auto shape_of = [](size_t rank, bool dynamic_last) -> Result<std::vector<int64_t>> {
    std::string dims;
    for (size_t i = 0; i < rank; ++i) {
      if (i) dims += ",";
      if (dynamic_last && i + 1 == rank) dims += "<=";
      dims += std::to_string(i + 1);
    }
    auto m = ParseModule("ENTRY e {\n  ROOT p = f32[" + dims + "] parameter(0)\n}\n", "d.hlo");
    if (!m) return Error(m.error());
    const Shape& shape = m->computations[0].instructions[0].shape;
    EXPECT_EQ(shape.IsDynamicDim(rank - 1), dynamic_last);
    return std::vector<int64_t>(shape.dims.begin(), shape.dims.end());
  };
  for (const bool dynamic_last : {false, true}) {
    auto dims = shape_of(64, dynamic_last);
    ASSERT_THAT(dims, IsOk());
    ASSERT_EQ(dims->size(), 64u);
    for (size_t i = 0; i < 64; ++i) EXPECT_EQ((*dims)[i], static_cast<int64_t>(i + 1));
    EXPECT_THAT(shape_of(65, dynamic_last),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("d.hlo:2:")));
    EXPECT_THAT(shape_of(65, dynamic_last),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("too many dimensions")));
  }
}

// Shapes written alike are parsed once and copied after: each shape of a module must still be
// the one its own text gives, whichever texts near it came first (the same dimensions with
// another layout, none, one written apart, one with tiles, dynamic ones, another type).
TEST(ParserTest, EveryShapeIsItsOwnTextsWhateverWasWrittenBefore) {
  const std::vector<std::string> texts = {
      "f32[2,3]{1,0}",          "f32[2,3]{0,1}", "f32[2,3]", "f32[2,3] {0,1}",
      "f32[2,3]{1,0:T(2,128)}", "f32[<=2,3]",    "f32[?,3]", "s32[2,3]{1,0}",
      "f32[2, 3]{1,0}",         "f32[]",         "f32[]{}",  "f32[2,3]{1, 0}"};
  auto alone = [](const std::string& text) -> Shape {
    auto m = ParseModule("ENTRY e {\n  ROOT p = " + text + " parameter(0)\n}\n", "one.hlo");
    EXPECT_THAT(m, IsOk()) << text;
    return m ? m->computations[0].instructions[0].shape : Shape{};
  };
  auto described = [](const Shape& s) {
    std::string d = CanonicalShapeText(s) + " dynamic:";
    for (size_t i = 0; i < s.dims.size(); ++i) d += s.IsDynamicDim(i) ? "1" : "0";
    if (s.layout) d += " details:" + std::string(s.layout->Details());
    return d;
  };
  // Each text twice, forwards then backwards, so that each comes both before and after the rest.
  std::vector<std::string> order = texts;
  order.insert(order.end(), texts.rbegin(), texts.rend());
  std::string header = "ENTRY e (";
  std::string body;
  for (size_t i = 0; i < order.size(); ++i) {
    header += (i ? ", h" : "h") + std::to_string(i) + ": " + order[i];
    body +=
        "  p" + std::to_string(i) + " = " + order[i] + " parameter(" + std::to_string(i) + ")\n";
  }
  header += ") -> (" + order[0] + ", " + order[2] + ") {\n";
  body += "  ROOT t = (" + order[0] + ", " + order[2] + ") tuple(p0, p2)\n}\n";
  auto m = ParseModule(header + body, "alike.hlo");
  ASSERT_THAT(m, IsOk());
  const Computation& entry = m->computations[0];
  ASSERT_EQ(entry.instructions.size(), order.size() + 1);
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(described(entry.instructions[i].shape), described(alone(order[i]))) << order[i];
  }
  const Shape& tuple = entry.instructions.back().shape;
  ASSERT_EQ(tuple.tuple_elements.size(), 2u);
  EXPECT_EQ(described(tuple.tuple_elements[0]), described(alone(order[0])));
  EXPECT_EQ(described(tuple.tuple_elements[1]), described(alone(order[2])));

  // A text refused is refused wherever it comes: after its valid neighbours too.
  EXPECT_THAT(ParseModule("ENTRY e {\n  a = f32[2,3]{1,0} parameter(0)\n"
                          "  ROOT b = f32[2,3]{1,1} parameter(1)\n}\n",
                          "bad.hlo"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad.hlo:3:")));
}

TEST(ParserTest, AsyncSugarAndScheduledModules) {
  auto m = ParseModule(R"(HloModule m, is_scheduled=true
ENTRY e {
  a = f32[2] parameter(0)
  s = ((f32[2]), f32[2], u32[]) custom-call-start(a), custom_call_target="foo"
  ROOT d = f32[2] custom-call-done(s)
})",
                       "a.hlo");
  ASSERT_THAT(m, IsOk());
  EXPECT_TRUE(m->IsScheduled());
  EXPECT_EQ(m->computations[0].instructions[1].opcode.opcode, Opcode::kCustomCall);
  EXPECT_EQ(m->computations[0].instructions[1].opcode.phase, AsyncPhase::kStart);
}

TEST(ParserTest, StackFrameTablesAreSkipped) {
  auto m = ParseModule(R"(HloModule m
FileNames
1 "/a/b.py"
FunctionNames
1 "f"
FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=2}
StackFrames
1 {file_location_id=1 parent_frame_id=1}

ENTRY e {
  ROOT a = f32[] parameter(0), metadata={op_name="x" stack_frame_id=1}
})",
                       "t.hlo");
  EXPECT_THAT(m, IsOk());
}

struct BadCase {
  const char* name;
  const char* text;
  const char* error;  // Expected substring, including line:col.
};

class ParserErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ParserErrorTest, ExplainsWhereAndWhat) {
  const BadCase& c = GetParam();
  auto m = ParseModule(c.text, "bad.hlo");
  ASSERT_FALSE(m.has_value()) << c.name;
  EXPECT_THAT(m.error().message(), HasSubstr(c.error)) << c.name;
  EXPECT_EQ(m.error().message().find('\n'), std::string::npos) << "one line: " << c.name;
  EXPECT_EQ(m.error().message().rfind("bad.hlo:", 0), 0u) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, ParserErrorTest,
    ::testing::Values(
        BadCase{"undefined_operand", "ENTRY e {\n  ROOT a = f32[] negate(x)\n}",
                "bad.hlo:2:25: error: undefined operand 'x'"},
        BadCase{"duplicate_name", "ENTRY e {\n  a = f32[] parameter(0)\n  a = f32[] negate(a)\n}",
                "bad.hlo:3:3: error: duplicate instruction name 'a'"},
        BadCase{"unknown_opcode", "ENTRY e {\n  ROOT a = f32[] frobnicate()\n}",
                "bad.hlo:2:18: error: unknown opcode 'frobnicate'"},
        BadCase{"unknown_attribute", "ENTRY e {\n  ROOT a = f32[] parameter(0), colour=red\n}",
                "bad.hlo:2:32: error: unknown attribute 'colour'"},
        BadCase{"trailing_garbage_after_value",
                "ENTRY e {\n  ROOT a = f32[] parameter(0), custom_call_target=\"x\" junk ?\n}",
                "bad.hlo:2:55: error: expected an instruction 'name = opcode(...)', got 'junk'"},
        BadCase{"duplicate_attribute",
                "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] reverse(a), "
                "dimensions={0}, dimensions={0}\n}",
                "error: duplicate attribute 'dimensions'"},
        BadCase{"unbalanced_braces",
                "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] reverse(a), "
                "dimensions={0)\n}",
                "bad.hlo:3:44: error: unbalanced brackets"},
        BadCase{"bad_shape", "ENTRY e {\n  ROOT a = f33[2] parameter(0)\n}",
                "bad.hlo:2:12: error: unknown element type 'f33'"},
        BadCase{"bad_dims", "ENTRY e {\n  ROOT a = f32[2,x] parameter(0)\n}",
                "bad.hlo:2:18: error: expected an integer"},
        BadCase{"bad_layout", "ENTRY e {\n  ROOT a = f32[2,3]{0} parameter(0)\n}",
                "bad.hlo:2:20: error: layout has 1 dimensions but the shape has 2"},
        BadCase{"repeated_layout_dim", "ENTRY e {\n  ROOT a = f32[2,3]{1,1} parameter(0)\n}",
                "bad.hlo:2:20: error: layout is not a permutation of the dimensions"},
        BadCase{"layout_dim_out_of_range", "ENTRY e {\n  ROOT a = f32[2,3]{0,2} parameter(0)\n}",
                "bad.hlo:2:20: error: layout is not a permutation of the dimensions"},
        BadCase{"truncated", "ENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[] negate(a",
                "bad.hlo:3:26: error: expected ',' or ')' in the operand list, got end of file"},
        BadCase{"unclosed_computation", "ENTRY e {\n  ROOT a = f32[] parameter(0)\n",
                "bad.hlo:1:9: error: unexpected end of file: computation 'e' is never closed"},
        BadCase{"binary_junk", "ENTRY e {\n  ROOT a = f32[] parameter(0)\xff\xfe\n}",
                "bad.hlo:2:30: error: unexpected byte 0xff"},
        BadCase{"empty", "", "bad.hlo:1:1: error: expected a computation, got end of file"},
        BadCase{"wrong_literal_size", "ENTRY e {\n  ROOT c = f32[3] constant({1, 2})\n}",
                "error: dimension 0 has 2 elements, expected 3"},
        BadCase{"partly_elided_literal", "ENTRY e {\n  ROOT c = f32[3] constant({1, ..., 3})\n}",
                "bad.hlo:2:28: error: '...' is only valid as a whole elided literal {...}"},
        BadCase{"undefined_callee",
                "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT c = f32[2] map(a), to_apply=f\n}",
                "bad.hlo:3:36: error: undefined computation 'f'"},
        BadCase{"two_roots",
                "ENTRY e {\n  ROOT a = f32[] parameter(0)\n  ROOT b = f32[] negate(a)\n}",
                "bad.hlo:3:3: error: more than one ROOT"},
        BadCase{"duplicate_parameter",
                "ENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[] parameter(0)\n}",
                "error: duplicate parameter number 0"},
        BadCase{"missing_parameter",
                "c {\n  ROOT p = f32[] parameter(0)\n}\nENTRY e {\n  a = f32[] parameter(1)\n"
                "  ROOT b = f32[] negate(a)\n}",
                "bad.hlo:4:1: error: computation 'e' lacks parameter 0"},
        BadCase{"parameter_out_of_range",
                "ENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[] parameter(2)\n}",
                "bad.hlo:3:3: error: parameter number 2 is out of range for a computation of 2 "
                "instructions"},
        BadCase{"unknown_module_attribute",
                "HloModule m, speed=fast\nENTRY e {\n  ROOT a = "
                "f32[] parameter(0)\n}",
                "bad.hlo:1:14: error: unknown module attribute 'speed'"},
        BadCase{"deep_nesting",
                "ENTRY e {\n  ROOT a = f32[] parameter(0), backend_config="
                "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"
                "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"
                "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"
                "}\n}",
                "error: value nested too deeply"}),
    [](const ::testing::TestParamInfo<BadCase>& p) { return std::string(p.param.name); });

// A value's brackets nest at most kMaxNesting (200) deep: the one past it is named.
TEST(ParserTest, ValuesNestTwoHundredBracketsDeepAndNoDeeper) {
  const auto module = [](int depth) {
    return "ENTRY e {\n  ROOT a = f32[] parameter(0), backend_config=" + std::string(depth, '{') +
           std::string(depth, '}') + "\n}\n";
  };
  EXPECT_THAT(ParseModule(module(200), "deep.hlo"), IsOk());
  // The 201st brace is at column 47 + 200 of line 2.
  EXPECT_THAT(ParseModule(module(201), "deep.hlo"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("deep.hlo:2:247: error: value nested too deeply")));
}

TEST(ParserTest, FirstModuleOfASplitFile) {
  auto m = ParseModule(
      "ENTRY a {\n  ROOT x = f32[] parameter(0)\n}\n// -----\nENTRY a {\n"
      "  ROOT x = s32[] parameter(0)\n}\n",
      "split.hlo");
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ(m->computations.size(), 1u);
}

}  // namespace
}  // namespace hlocache::hlo
