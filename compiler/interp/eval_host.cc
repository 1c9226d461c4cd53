// Transfers with the host while the program runs (interp::HostTransfers): infeed and outfeed,
// and send and recv with is_host_transfer=true.
//
// infeed(token) takes the host's next value of the feed: (value, token). outfeed(value, token)
// gives it one: a token (its outfeed_shape attribute, which XLA's verifier holds equal to the
// operand's shape, is not read). send(value, token), channel_id=N gives the host a value on
// channel N when it runs: (value, u32[] 0, token); send-done of it is a token. recv(token),
// channel_id=N takes the host's next value on channel N: (value, u32[] 0, token); recv-done of
// it is (value, token). Transfers happen in the order the program runs them (textual order).
// Sends and recvs between devices (is_host_transfer=false) have no peer in a program of one
// participant and are not computed.
#include <string>

#include "compiler/interp/eval_families.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

Shape TupleOf(std::vector<Shape> elements) {
  Shape s;
  s.tuple_elements = std::move(elements);
  return s;
}

Literal Token() { return Literal(ArrayShape(PrimitiveType::kToken)); }

Literal Tuple(std::vector<Literal> elements) {
  std::vector<Shape> shapes;
  for (const Literal& e : elements) shapes.push_back(e.shape());
  Literal t(TupleOf(std::move(shapes)));
  for (size_t k = 0; k < elements.size(); ++k) t.elements()[k] = std::move(elements[k]);
  return t;
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kSendDone) return Token();
  if (op == Opcode::kRecvDone) return Tuple({operands[0]->elements()[0], Token()});
  HostTransfers* host = ctx.Host();
  if (host == nullptr) {
    return Error(ctx.Unsupported(
        inst, std::string(hlo::OpcodeName(op)) + " without a host to transfer with"));
  }
  HLOCACHE_ASSIGN_OR_RETURN(int64_t channel, ctx.IntOr(inst, "channel_id", -1));
  switch (op) {
    case Opcode::kInfeed: {
      HLOCACHE_ASSIGN_OR_RETURN(
          Literal value, host->Receive(HostTransferKind::kFeed, -1, inst.shape.tuple_elements[0]));
      return Tuple({std::move(value), Token()});
    }
    case Opcode::kOutfeed:
      HLOCACHE_RETURN_IF_ERROR(host->Send(HostTransferKind::kFeed, -1, *operands[0]));
      return Token();
    case Opcode::kSend:
      HLOCACHE_RETURN_IF_ERROR(host->Send(HostTransferKind::kChannel, channel, *operands[0]));
      return Tuple({*operands[0], Literal(ArrayShape(PrimitiveType::kU32)), Token()});
    default: {  // recv.
      HLOCACHE_ASSIGN_OR_RETURN(Literal value, host->Receive(HostTransferKind::kChannel, channel,
                                                             inst.shape.tuple_elements[0]));
      return Tuple({std::move(value), Literal(ArrayShape(PrimitiveType::kU32)), Token()});
    }
  }
}

}  // namespace

OpFamily HostOps() { return {HostRules().takes, Eval}; }

}  // namespace hlocache::interp
