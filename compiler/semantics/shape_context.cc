#include "compiler/semantics/shape_context.h"

namespace hlocache::interp {

namespace {
std::string Where(const hlo::Module& m, const hlo::Instruction& inst) {
  return m.filename() + ":" + std::to_string(m.LineOf(inst.offset));
}
}  // namespace

std::string InstructionLocation(const hlo::Module& module, const hlo::Instruction& inst) {
  return Where(module, inst) + ": '" + std::string(inst.name) + "' (" +
         std::string(hlo::OpcodeName(inst.opcode.opcode)) + ")";
}

Status MalformedInstruction(const hlo::Module& module, const hlo::Instruction& inst,
                            const std::string& why) {
  return InvalidArgument(InstructionLocation(module, inst) + ": " + why);
}

Status UnsupportedInstruction(const hlo::Module& module, const hlo::Instruction& inst,
                              std::string_view who, const std::string& what) {
  return FailedPrecondition(Where(module, inst) + ": " + std::string(who) + " does not support " +
                            what + " (instruction '" + std::string(inst.name) + "')");
}

Status ShapeContext::Unsupported(const hlo::Instruction& inst, const std::string& what) const {
  return UnsupportedInstruction(module_, inst, "hlocache", what);
}

Status ShapeContext::Malformed(const hlo::Instruction& inst, const std::string& why) const {
  return MalformedInstruction(module_, inst, why);
}

Result<std::vector<int64_t>> ShapeContext::Ints(const hlo::Instruction& inst,
                                                const char* name) const {
  const hlo::Attribute* a = inst.FindAttribute(name);
  if (a == nullptr) return Error(Malformed(inst, std::string("lacks ") + name));
  return module_.IntList(*a);
}

Result<std::vector<int64_t>> ShapeContext::IntsOr(const hlo::Instruction& inst, const char* name,
                                                  std::vector<int64_t> fallback) const {
  const hlo::Attribute* a = inst.FindAttribute(name);
  if (a == nullptr) return fallback;
  return module_.IntList(*a);
}

Result<int64_t> ShapeContext::IntOr(const hlo::Instruction& inst, const char* name,
                                    int64_t fallback) const {
  const hlo::Attribute* a = inst.FindAttribute(name);
  if (a == nullptr) return fallback;
  return module_.Int(*a);
}

std::string ShapeContext::AttributeText(const hlo::Instruction& inst, const char* name) const {
  const hlo::Attribute* a = inst.FindAttribute(name);
  if (a == nullptr) return "";
  std::string text;
  for (uint32_t t = a->value.begin; t < a->value.end; ++t) text += module_.TokenText(t);
  return text;
}

Result<int32_t> ShapeContext::Callee(const hlo::Instruction& inst, const char* name) const {
  const std::vector<int32_t> callees = module_.CalleesOf(inst, name);
  if (callees.size() != 1) {
    return Error(Malformed(inst, std::string("does not name one computation in ") + name + "="));
  }
  return callees[0];
}

}  // namespace hlocache::interp
