#include "compiler/semantics/constant.h"

#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/semantics/shape_context.h"

namespace hlocache::interp {

Status FillConstant(const hlo::Module& m, const hlo::Instruction& inst, Literal& out) {
  const ShapeContext ctx(m);
  if (inst.literal_elided) return ctx.Unsupported(inst, "elided constants ({...})");
  if (out.is_tuple()) return ctx.Unsupported(inst, "tuple constants");
  std::vector<std::string_view> scalars;
  for (uint32_t t = inst.literal.begin; t < inst.literal.end; ++t) {
    const hlo::Token& tok = m.tokens[t];
    if (tok.kind == hlo::TokenKind::kInt || tok.kind == hlo::TokenKind::kFloat ||
        tok.kind == hlo::TokenKind::kIdent) {
      scalars.push_back(m.TokenText(tok));
    }
  }
  if (scalars.size() != out.size() && scalars.size() != 1) {
    return ctx.Unsupported(inst, "a constant of " + std::to_string(scalars.size()) +
                                     " values for " + std::to_string(out.size()) + " elements");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string text(scalars.size() == 1 ? scalars[0] : scalars[i]);
    if (text == "true" || text == "false") {
      if (out.is_float()) {
        out.SetFloat(i, text == "true" ? 1.0 : 0.0);
      } else {
        out.SetInt(i, text == "true" ? 1 : 0);
      }
    } else if (out.is_float()) {
      out.SetFloat(i, std::strtod(text.c_str(), nullptr));
    } else {
      int64_t v = 0;
      uint64_t u = 0;
      if (std::from_chars(text.data(), text.data() + text.size(), v).ec == std::errc()) {
        out.SetInt(i, v);
      } else if (std::from_chars(text.data(), text.data() + text.size(), u).ec == std::errc()) {
        out.SetInt(i, static_cast<int64_t>(u));
      } else {
        return ctx.Unsupported(inst, "the constant value '" + text + "'");
      }
    }
  }
  return Status::Ok();
}

Result<Literal> ConstantValue(const hlo::Module& module, const hlo::Instruction& constant) {
  if (constant.opcode.opcode != hlo::Opcode::kConstant) {
    return Error(InvalidArgument("'" + std::string(constant.name) + "' is not a constant"));
  }
  auto made = Literal::MakeZeros(constant.shape);
  if (!made) return Error(ShapeContext(module).Unsupported(constant, made.error().message()));
  HLOCACHE_RETURN_IF_ERROR(FillConstant(module, constant, *made));
  return std::move(*made);
}

}  // namespace hlocache::interp
