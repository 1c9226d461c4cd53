// Transfers with the host (see compiler/interp/eval_host.cc for their meaning): calls of the
// prelude's hc_receive and hc_send with a description of each array (its buffer, bytes, element
// type and dimensions), which go to the hlocache_host the run was given (cpu_codegen.h). A
// transfer the host refuses, or one without a host, ends the run with 2.
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;

bool NotElementwise(Opcode) { return false; }

// Statements declaring `name`, an array of hc_host_leaf describing `leaves`.
std::string Describe(CpuEmitter& e, const std::string& name, const std::vector<Leaf>& leaves) {
  std::string code, list;
  for (size_t k = 0; k < leaves.size(); ++k) {
    const hlo::Shape& s = *leaves[k].shape;
    const std::string dims = e.Fresh("dims");
    code += IntArray(dims, s.dims);
    list += std::string(k ? ", " : "") + "{const_cast<void*>(static_cast<const void*>(" +
            leaves[k].ptr + ")), " + Int(ByteCount(s)) + ", \"" +
            std::string(hlo::PrimitiveTypeName(s.type)) + "\", " +
            Int(static_cast<int64_t>(s.dims.size())) + ", " + dims + "}";
  }
  return code + "    const hc_host_leaf " + name + "[] = {" + list + "};\n";
}

// The leaves of value `leaves` before the last `drop` (the u32[] and token of a send's tuple).
std::vector<Leaf> Value(const std::vector<Leaf>& leaves, size_t drop) {
  return std::vector<Leaf>(leaves.begin(), leaves.end() - static_cast<std::ptrdiff_t>(drop));
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const hlo::Module& m = e.module();
  int64_t channel = -1;
  if (const hlo::Attribute* a = inst.FindAttribute("channel_id")) {
    if (auto c = m.Int(*a)) channel = *c;
  }
  switch (inst.opcode.opcode) {
    case Opcode::kInfeed:
    case Opcode::kRecv: {
      // (value, token) or (value, u32[], token): the value's leaves come from the host, the
      // others are zeros.
      const std::vector<Leaf> out = e.MaterializeLeaves(index, inst);
      const size_t extra = inst.opcode.opcode == Opcode::kInfeed ? 1 : 2;
      const std::vector<Leaf> value = Value(out, extra);
      std::string code = "  {\n" + Describe(e, "leaves", value) + "    if (!hc_receive(" +
                         (inst.opcode.opcode == Opcode::kInfeed ? "0" : "1") + ", " + Int(channel) +
                         ", " + Int(static_cast<int64_t>(value.size())) + ", leaves)) return 1;\n";
      for (size_t k = value.size(); k < out.size(); ++k) {
        code += "    std::memset(" + out[k].ptr + ", 0, " + Int(ByteCount(*out[k].shape)) + ");\n";
      }
      e.Emit(code + "  }\n");
      return Status::Ok();
    }
    case Opcode::kOutfeed:
    case Opcode::kSend: {
      const std::vector<Leaf> value = e.OperandLeaves(inst, 0);
      std::string code = "  {\n" + Describe(e, "leaves", value) + "    if (!hc_send(" +
                         (inst.opcode.opcode == Opcode::kOutfeed ? "0" : "1") + ", " +
                         Int(channel) + ", " + Int(static_cast<int64_t>(value.size())) +
                         ", leaves)) return 1;\n  }\n";
      e.Emit(code);
      if (inst.opcode.opcode == Opcode::kOutfeed) {
        e.Emit("  " + e.Materialize(index, inst) + "[0] = 0;\n");
        return Status::Ok();
      }
      // (value, u32[], token): the value as it was, then zeros.
      std::vector<Leaf> out = value;
      const char* parts[] = {"context", "token"};
      for (size_t k = 1; k <= 2; ++k) {
        const hlo::Shape& s = inst.shape.tuple_elements[k];
        const std::string name = e.Fresh(parts[k - 1]);
        e.Declare(name, s);
        e.Emit("  std::memset(" + name + ", 0, " + Int(ByteCount(s)) + ");\n");
        out.push_back({name, &s});
      }
      e.Bind(index, std::move(out));
      return Status::Ok();
    }
    case Opcode::kSendDone:
      e.Emit("  " + e.Materialize(index, inst) + "[0] = 0;\n");
      return Status::Ok();
    default: {  // recv-done: the value received and its token.
      const std::vector<Leaf>& in = e.OperandLeaves(inst, 0);
      std::vector<Leaf> out = Value(in, 2);
      out.push_back(in.back());
      e.Bind(index, std::move(out));
      return Status::Ok();
    }
  }
}

}  // namespace

CpuOpFamily CpuHostOps() { return {interp::HostRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
