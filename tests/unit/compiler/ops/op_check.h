// Helpers of the op family tests (ops/*_test.cc): literals, evaluation with hand-computed
// expectations checked against the compiled code too, and malformed modules refused by both the
// interpreter and the code generator with their line.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/codegen/cpu_codegen.h"
#include "compiler/hlo/parser.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/arguments.h"
#include "tests/unit/compiler/compile_check.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler::op_check {

using hlo::PrimitiveType;
using interp::Literal;

inline Literal Scalar(PrimitiveType t, double v) { return Array(t, {}, {v}); }

inline Literal Tuple(std::vector<Literal> elements) {
  hlo::Shape s;
  for (const Literal& e : elements) s.tuple_elements.push_back(e.shape());
  Literal t(s);
  for (size_t k = 0; k < elements.size(); ++k) t.elements()[k] = std::move(elements[k]);
  return t;
}

inline Result<Literal> Eval(const std::string& text, const std::vector<Literal>& args) {
  auto m = hlo::ParseModule(text, "g.hlo");
  if (!m) return Error(m.error());
  return interp::Evaluate(*m, args);
}

// Evaluates `text` on `args`, expects `want`, and checks the compiled code against the
// interpreter on the same arguments.
inline void ExpectValue(const std::string& text, const std::vector<Literal>& args,
                        const Literal& want) {
  auto got = Eval(text, args);
  ASSERT_THAT(got, IsOk());
  EXPECT_TRUE(*got == want) << "interpreter " << got->ToString() << ", want " << want.ToString();
  ExpectCompiledMatchesInterpreter(text, args);
}

// "g.hlo:N:" for the line of `text` that holds `needle`.
inline std::string At(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(at), '\n');
  return "g.hlo:" + std::to_string(line) + ":";
}

// Both the interpreter and the code generator refuse `text` as malformed (kInvalidArgument),
// naming the line of `needle` and saying `why`.
inline void ExpectMalformed(const std::string& text, const std::string& needle,
                            const std::string& why) {
  SCOPED_TRACE(why);
  auto m = hlo::ParseModule(text, "g.hlo");
  ASSERT_THAT(m, IsOk());
  auto args = interp::MakeArguments(*m, interp::ArgumentFill::kZeros, 0);
  ASSERT_THAT(args, IsOk());
  const auto refused =
      StatusIs(StatusCode::kInvalidArgument,
               ::testing::AllOf(::testing::HasSubstr(At(text, needle)), ::testing::HasSubstr(why)));
  interp::RecordingHost host(0);  // For the transfers before the malformed instruction.
  EXPECT_THAT(interp::Evaluate(*m, *args, &host), refused);
  EXPECT_THAT(LowerToCpp(*m), refused);
}

// `text` with its first `from` replaced by `to`.
inline std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

}  // namespace hlocache::compiler::op_check
