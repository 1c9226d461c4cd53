#include "compiler/hlo/collectives.h"

#include <charconv>
#include <vector>

namespace hlocache::hlo {
namespace {

std::string ValueText(const Module& m, const Attribute& a) {
  std::string text;
  for (uint32_t t = a.value.begin; t < a.value.end; ++t) text += m.TokenText(t);
  return text;
}

// Every integer of an attribute value, in order.
std::vector<int64_t> IntegersIn(const Module& m, const Attribute& a) {
  std::vector<int64_t> out;
  for (uint32_t t = a.value.begin; t < a.value.end; ++t) {
    if (m.tokens[t].kind != TokenKind::kInt) continue;
    const std::string_view s = m.TokenText(t);
    int64_t v = 0;
    if (std::from_chars(s.data(), s.data() + s.size(), v).ec == std::errc()) out.push_back(v);
  }
  return out;
}

bool IsHostTransfer(const Module& m, const Instruction& inst) {
  const Attribute* a = inst.FindAttribute("is_host_transfer");
  return a != nullptr && ValueText(m, *a) == "true";
}

// The number of devices a replica_groups value spans, from its own spelling: the largest id
// plus one for explicit lists, N for the iota form [G,S]<=[N] (the product of the dims after
// '<='), the product of the axis sizes for a mesh; 0 for an empty value ({}: all of them).
int64_t DevicesNamed(const Module& m, const Attribute& a) {
  const std::string text = ValueText(m, a);
  if (text.empty() || text == "{}") return 0;
  std::vector<int64_t> ints = IntegersIn(m, a);
  if (text.rfind("mesh", 0) == 0) {
    // mesh['axis_0'=2,'axis_1'=2] {'axis_1'}: the sizes follow '='.
    int64_t devices = 1;
    for (uint32_t t = a.value.begin; t + 1 < a.value.end; ++t) {
      if (m.tokens[t].kind == TokenKind::kEqual && m.tokens[t + 1].kind == TokenKind::kInt) {
        const std::string_view s = m.TokenText(t + 1);
        int64_t v = 0;
        std::from_chars(s.data(), s.data() + s.size(), v);
        devices *= v;
      }
    }
    return devices;
  }
  if (text[0] == '[') {
    // [G,S]<=[d0,d1,...]T(...): the devices are d0*d1*...
    int64_t devices = 1;
    bool after = false;
    for (uint32_t t = a.value.begin; t < a.value.end; ++t) {
      const TokenKind k = m.tokens[t].kind;
      if (k == TokenKind::kLessEq) after = true;
      if (after && k == TokenKind::kRParen) break;
      if (after && k == TokenKind::kIdent) break;  // T(...) follows.
      if (after && k == TokenKind::kInt) {
        const std::string_view s = m.TokenText(t);
        int64_t v = 0;
        std::from_chars(s.data(), s.data() + s.size(), v);
        devices *= v;
      }
    }
    return devices;
  }
  int64_t largest = -1;
  for (int64_t v : ints) largest = std::max(largest, v);
  return largest + 1;
}

bool IsCollectiveOpcode(Opcode op) {
  switch (op) {
    case Opcode::kAllGather:
    case Opcode::kAllGatherStart:
    case Opcode::kAllGatherDone:
    case Opcode::kAllReduce:
    case Opcode::kAllReduceStart:
    case Opcode::kAllReduceDone:
    case Opcode::kAllToAll:
    case Opcode::kRaggedAllToAll:
    case Opcode::kReduceScatter:
    case Opcode::kCollectiveBroadcast:
    case Opcode::kCollectivePermute:
    case Opcode::kCollectivePermuteStart:
    case Opcode::kCollectivePermuteDone:
    case Opcode::kCollectiveReduce:
    case Opcode::kPartitionId:
    case Opcode::kReplicaId:
    case Opcode::kSend:
    case Opcode::kSendDone:
    case Opcode::kRecv:
    case Opcode::kRecvDone:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool IsCollective(const Module& module, const Instruction& inst) {
  if (inst.opcode.phase != AsyncPhase::kNone) return false;
  const Opcode op = inst.opcode.opcode;
  if (!IsCollectiveOpcode(op)) return false;
  if (op == Opcode::kSend || op == Opcode::kSendDone || op == Opcode::kRecv ||
      op == Opcode::kRecvDone) {
    return !IsHostTransfer(module, inst);
  }
  return true;
}

int64_t ProgramParticipants(const Module& module) {
  int64_t n = 1;
  for (const char* name : {"replica_count", "num_partitions"}) {
    if (const Attribute* a = module.FindAttribute(name)) {
      if (auto v = module.Int(*a); v && *v > 0) n *= *v;
    }
  }
  return n;
}

std::string WhyNotSingleParticipant(const Module& module, const Instruction& inst) {
  if (!IsCollective(module, inst)) return "";
  const int64_t program = ProgramParticipants(module);
  if (program > 1) {
    return "the program has " + std::to_string(program) +
           " participants (replica_count x num_partitions)";
  }
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kSend || op == Opcode::kSendDone || op == Opcode::kRecv ||
      op == Opcode::kRecvDone) {
    return "a transfer between devices needs a peer";
  }
  if (const Attribute* a = inst.FindAttribute("replica_groups")) {
    const int64_t devices = DevicesNamed(module, *a);
    if (devices > 1) {
      return "replica_groups=" + ValueText(module, *a) + " names " + std::to_string(devices) +
             " participants";
    }
  }
  if (const Attribute* a = inst.FindAttribute("source_target_pairs")) {
    for (int64_t v : IntegersIn(module, *a)) {
      if (v != 0) {
        return "source_target_pairs=" + ValueText(module, *a) + " names participant " +
               std::to_string(v);
      }
    }
  }
  return "";
}

std::string WhyModuleNotSingleParticipant(const Module& module) {
  std::vector<bool> seen(module.computations.size(), false);
  std::vector<int32_t> pending;
  if (module.entry >= 0) pending.push_back(module.entry);
  while (!pending.empty()) {
    const int32_t c = pending.back();
    pending.pop_back();
    if (c < 0 || static_cast<size_t>(c) >= seen.size() || seen[static_cast<size_t>(c)]) continue;
    seen[static_cast<size_t>(c)] = true;
    for (const Instruction& inst : module.computations[static_cast<size_t>(c)].instructions) {
      if (std::string why = WhyNotSingleParticipant(module, inst); !why.empty()) {
        return "'" + std::string(inst.name) + "' (" + std::string(OpcodeName(inst.opcode.opcode)) +
               "): " + why;
      }
      for (int32_t callee : inst.callees) pending.push_back(callee);
    }
  }
  return "";
}

}  // namespace hlocache::hlo
