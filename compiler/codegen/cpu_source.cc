#include "compiler/codegen/cpu_source.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "compiler/semantics/constant.h"
#include "compiler/semantics/core_ops.h"
#include "compiler/semantics/half.h"
#include "compiler/semantics/minifloat.h"
#include "compiler/semantics/shape_rules.h"

namespace hlocache::compiler {

using hlo::PrimitiveType;

const char* CType(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kPred:
      return "bool";
    case PrimitiveType::kToken:
      return "uint8_t";  // One byte that holds no data, so that tokens are leaves like any other.
    case PrimitiveType::kS1:
    case PrimitiveType::kS2:
    case PrimitiveType::kS4:
    case PrimitiveType::kS8:
      return "int8_t";
    case PrimitiveType::kS16:
      return "int16_t";
    case PrimitiveType::kS32:
      return "int32_t";
    case PrimitiveType::kS64:
      return "int64_t";
    case PrimitiveType::kU1:
    case PrimitiveType::kU2:
    case PrimitiveType::kU4:
    case PrimitiveType::kU8:
      return "uint8_t";
    case PrimitiveType::kU16:
      return "uint16_t";
    case PrimitiveType::kU32:
      return "uint32_t";
    case PrimitiveType::kU64:
      return "uint64_t";
    case PrimitiveType::kF16:
      return "hc_f16";
    case PrimitiveType::kBF16:
      return "hc_bf16";
    case PrimitiveType::kF32:
      return "float";
    case PrimitiveType::kF64:
      return "double";
    case PrimitiveType::kF8E5M2:
      return "hc_f8e5m2";
    case PrimitiveType::kF8E4M3:
      return "hc_f8e4m3";
    case PrimitiveType::kF8E3M4:
      return "hc_f8e3m4";
    case PrimitiveType::kF8E4M3FN:
      return "hc_f8e4m3fn";
    case PrimitiveType::kF8E4M3FNUZ:
      return "hc_f8e4m3fnuz";
    case PrimitiveType::kF8E5M2FNUZ:
      return "hc_f8e5m2fnuz";
    case PrimitiveType::kF8E4M3B11FNUZ:
      return "hc_f8e4m3b11fnuz";
    case PrimitiveType::kF6E2M3FN:
      return "hc_f6e2m3fn";
    case PrimitiveType::kF6E3M2FN:
      return "hc_f6e3m2fn";
    case PrimitiveType::kF4E2M1FN:
      return "hc_f4e2m1fn";
    case PrimitiveType::kF8E8M0FNU:
      return "hc_f8e8m0fnu";
    default:
      return nullptr;
  }
}

bool IsSubByteInteger(PrimitiveType t) {
  return (hlo::IsSignedInt(t) || hlo::IsUnsignedInt(t)) && hlo::PrimitiveTypeBits(t) < 8;
}

std::string TypeAndWidth(PrimitiveType t) {
  if (!IsSubByteInteger(t)) return CType(t);
  return std::string(CType(t)) + ", " + std::to_string(hlo::PrimitiveTypeBits(t));
}

std::string SubByteWrapped(PrimitiveType t, const std::string& expr) {
  if (!IsSubByteInteger(t)) return expr;
  return "hc_wrap<" + TypeAndWidth(t) + ">(" + expr + ")";
}

std::string WrapSubBytes(const std::string& buffer, const hlo::Shape& s) {
  if (!IsSubByteInteger(s.type)) return "";
  return "  for (int64_t i = 0; i < " + Int(*s.ElementCount()) + "; ++i) " + buffer +
         "[i] = " + SubByteWrapped(s.type, buffer + "[i]") + ";\n";
}

std::string Int(int64_t v) { return std::to_string(v) + "LL"; }

std::string DoubleLiteral(double v) {
  if (std::isnan(v)) {
    return std::signbit(v) ? "-std::numeric_limits<double>::quiet_NaN()"
                           : "std::numeric_limits<double>::quiet_NaN()";
  }
  if (std::isinf(v)) {
    return v < 0 ? "-std::numeric_limits<double>::infinity()"
                 : "std::numeric_limits<double>::infinity()";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string ElementLiteral(const interp::Literal& value, size_t e) {
  const PrimitiveType t = value.type();
  if (t == PrimitiveType::kF16 || t == PrimitiveType::kBF16) {
    const auto format = t == PrimitiveType::kF16 ? interp::kF16Format : interp::kBF16Format;
    return "{" + std::to_string(interp::EncodeHalf(value.GetFloat(e), format)) + "}";
  }
  if (const auto mini = interp::MiniFloatFormatOf(t)) {
    return "{" + std::to_string(interp::EncodeMiniFloat(value.GetFloat(e), *mini)) + "}";
  }
  if (value.is_float()) {
    return "static_cast<" + std::string(CType(t)) + ">(" + DoubleLiteral(value.GetFloat(e)) + ")";
  }
  if (t == PrimitiveType::kPred) return value.GetInt(e) != 0 ? "true" : "false";
  return "static_cast<" + std::string(CType(t)) + ">(" +
         std::to_string(static_cast<uint64_t>(value.GetInt(e))) + "ULL)";
}

int64_t Product(std::span<const int64_t> v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

int64_t ElementCount(const hlo::Shape& s) { return *s.BoundElementCount(); }
int64_t DataBytes(const hlo::Shape& s) { return ElementCount(s) * hlo::BufferElementBytes(s.type); }
int64_t ByteCount(const hlo::Shape& s) {
  return DataBytes(s) + (s.IsDynamic() ? 4 * static_cast<int64_t>(s.dims.size()) : 0);
}

std::string DeclareDims(const std::string& var, const std::string& buffer, const hlo::Shape& s) {
  const std::string rank = Int(static_cast<int64_t>(s.dims.size()));
  std::string out = IntArray(var + "_bounds", s.dims) + "    int64_t " + var + "[" +
                    std::to_string(std::max<size_t>(s.dims.size(), 1)) + "];\n";
  if (!s.IsDynamic()) {
    return out + "    for (int64_t k = 0; k < " + rank + "; ++k) " + var + "[k] = " + var +
           "_bounds[k];\n";
  }
  return out + "    hc_dims_get(" + buffer + ", " + Int(DataBytes(s)) + ", " + rank + ", " + var +
         "_bounds, " + var + ");\n";
}

std::string SetDims(const std::string& buffer, const hlo::Shape& s, const std::string& dims) {
  if (!s.IsDynamic()) return "";
  return "    hc_dims_set(" + buffer + ", " + Int(DataBytes(s)) + ", " +
         Int(static_cast<int64_t>(s.dims.size())) + ", " + dims + ");\n";
}

std::string BoolArray(const std::string& name, const std::vector<bool>& v) {
  std::string out = "    static const bool " + name + "[] = {";
  for (size_t k = 0; k < v.size(); ++k)
    out += std::string(k ? ", " : "") + (v[k] ? "true" : "false");
  if (v.empty()) out += "false";
  return out + "};\n";
}

std::vector<bool> DynamicFlags(const hlo::Shape& s) {
  std::vector<bool> out(s.dims.size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = s.IsDynamicDim(k);
  return out;
}

std::string IntArray(const std::string& name, std::span<const int64_t> v) {
  std::string out = "    static const int64_t " + name + "[] = {";
  for (size_t k = 0; k < v.size(); ++k) out += (k ? ", " : "") + Int(v[k]);
  if (v.empty()) out += "0";
  return out + "};\n";
}

const char* CompareOperator(std::string_view direction) {
  return direction == "EQ"   ? "=="
         : direction == "NE" ? "!="
         : direction == "LT" ? "<"
         : direction == "LE" ? "<="
         : direction == "GT" ? ">"
         : direction == "GE" ? ">="
                             : nullptr;
}

const char* CompareKey(const hlo::Module& module, const hlo::Instruction& compare,
                       PrimitiveType operand_type) {
  const hlo::Attribute* type = compare.FindAttribute("type");
  return type != nullptr && hlo::IsFloat(operand_type) &&
                 module.TokenText(type->value.begin) == "TOTALORDER"
             ? "hc_total_key(hc_load("
             : "hc_key((";
}

Result<AffineRead> AffineReadOf(const hlo::Module& module, const hlo::Instruction& inst,
                                std::span<const int64_t> operand_dims) {
  const auto is = hlo::RowMajorStrides(operand_dims);
  AffineRead out;
  out.coefficients.assign(inst.shape.dims.size(), 0);
  std::vector<int64_t>& coef = out.coefficients;
  auto dimensions = [&]() -> Result<std::vector<int64_t>> {
    const hlo::Attribute* a = inst.FindAttribute("dimensions");
    if (a == nullptr) {
      return Error(InvalidArgument("'" + std::string(inst.name) + "' has no dimensions"));
    }
    return module.IntList(*a);
  };
  switch (inst.opcode.opcode) {
    case hlo::Opcode::kBroadcast: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, dimensions());
      for (size_t k = 0; k < dims.size(); ++k) coef[static_cast<size_t>(dims[k])] = is[k];
      return out;
    }
    case hlo::Opcode::kTranspose: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> perm, dimensions());
      for (size_t k = 0; k < perm.size(); ++k) coef[k] = is[static_cast<size_t>(perm[k])];
      return out;
    }
    case hlo::Opcode::kSlice: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> spec, interp::SliceSpec(module, inst));
      for (size_t k = 0; k < coef.size(); ++k) {
        out.base += spec[3 * k] * is[k];
        coef[k] = spec[3 * k + 2] * is[k];
      }
      return out;
    }
    case hlo::Opcode::kReverse: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, dimensions());
      coef = is;
      for (int64_t d : dims) {
        const auto k = static_cast<size_t>(d);
        out.base += (operand_dims[k] - 1) * is[k];
        coef[k] = -is[k];
      }
      return out;
    }
    default:
      return Error(FailedPrecondition("'" + std::string(inst.name) + "' is not an affine read"));
  }
}

std::string NestedLoops(std::span<const int64_t> extents, const std::string& body, int indent) {
  std::string out;
  std::string pad(static_cast<size_t>(indent), ' ');
  for (size_t d = 0; d < extents.size(); ++d) {
    out += pad + "for (int64_t d" + std::to_string(d) + " = 0; d" + std::to_string(d) + " < " +
           Int(extents[d]) + "; ++d" + std::to_string(d) + ")\n";
    pad += "  ";
  }
  return out + pad + body + "\n";
}

std::string Affine(const std::string& base, std::span<const int64_t> coefficients) {
  std::string e = base;
  for (size_t d = 0; d < coefficients.size(); ++d) {
    if (coefficients[d] == 0) continue;
    e += " + d" + std::to_string(d) + " * " + Int(coefficients[d]);
  }
  return e;
}

std::string Digits(const std::string& linear, const std::string& dims, size_t rank,
                   const std::vector<std::pair<std::string, std::string>>& offsets) {
  if (rank == 0) return "";
  std::string out = "      { int64_t rest = " + linear +
                    ";\n        for (int d = " + std::to_string(rank) +
                    " - 1; d >= 0; --d) {\n          const int64_t x = rest % " + dims +
                    "[d];\n          rest /= " + dims + "[d];\n";
  for (const auto& [offset, strides] : offsets) {
    out += "          " + offset + " += x * " + strides + "[d];\n";
  }
  return out + "        }\n      }\n";
}

const char* OneOpCombiner(const hlo::Computation& f, PrimitiveType type, bool& swapped) {
  // Sub-byte integers take the general path, which wraps each result to its width.
  if (f.root < 0 || f.instructions.size() != 3 || f.parameters.size() != 2 ||
      type == PrimitiveType::kPred || IsSubByteInteger(type)) {
    return nullptr;
  }
  const hlo::Instruction& root = f.instructions[static_cast<size_t>(f.root)];
  if (root.operands.size() != 2 || root.opcode.phase != hlo::AsyncPhase::kNone ||
      root.operands[0] == root.operands[1] || !root.shape.IsArray() || root.shape.type != type ||
      !root.shape.dims.empty()) {
    return nullptr;
  }
  for (int32_t o : root.operands) {
    const hlo::Instruction& p = f.instructions[static_cast<size_t>(o)];
    if (p.opcode.opcode != hlo::Opcode::kParameter || !p.shape.IsArray() || p.shape.type != type ||
        !p.shape.dims.empty()) {
      return nullptr;
    }
  }
  swapped = f.instructions[static_cast<size_t>(root.operands[0])].parameter_number != 0;
  switch (root.opcode.opcode) {
    case hlo::Opcode::kAdd:
      return "hc_add";
    case hlo::Opcode::kMultiply:
      return "hc_mul";
    case hlo::Opcode::kMaximum:
      return "hc_max";
    case hlo::Opcode::kMinimum:
      return "hc_min";
    default:
      return nullptr;
  }
}

}  // namespace hlocache::compiler
