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
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

bool Takes(Opcode op) { return hlo::IsHostTransfer(op); }

bool IsToken(const Shape& s) { return s.IsArray() && s.type == PrimitiveType::kToken; }

Shape TokenShape() { return ArrayShape(PrimitiveType::kToken); }

Shape TupleOf(std::vector<Shape> elements) {
  Shape s;
  s.tuple_elements = std::move(elements);
  return s;
}

// Whether `s` is (value, rest...) with `rest` the shapes after the value.
bool IsValueAnd(const Shape& s, const std::vector<Shape>& rest) {
  if (!s.IsTuple() || s.tuple_elements.size() != rest.size() + 1) return false;
  for (size_t k = 0; k < rest.size(); ++k) {
    if (!hlo::SameValues(s.tuple_elements[k + 1], rest[k])) return false;
  }
  return true;
}

Status CheckChannel(const ShapeContext& ctx, const Instruction& inst) {
  if (ctx.AttributeText(inst, "is_host_transfer") != "true") {
    return ctx.Unsupported(inst, "a send or recv between devices (is_host_transfer=false)");
  }
  HLOCACHE_ASSIGN_OR_RETURN(int64_t channel, ctx.IntOr(inst, "channel_id", -1));
  if (channel < 0) return ctx.Malformed(inst, "channel_id is not a non-negative integer");
  return Status::Ok();
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  const Shape& r = inst.shape;
  const Shape u32 = ArrayShape(PrimitiveType::kU32);
  switch (inst.opcode.opcode) {
    case Opcode::kInfeed:
      if (operands.size() != 1 || !IsToken(*operands[0])) {
        return ctx.Malformed(inst, "takes a token");
      }
      if (!IsValueAnd(r, {TokenShape()}))
        return ctx.Malformed(inst, "the result is not (value, token)");
      return Status::Ok();
    case Opcode::kOutfeed:
      if (operands.size() != 2 || !IsToken(*operands[1])) {
        return ctx.Malformed(inst, "takes a value and a token");
      }
      if (!IsToken(r)) return ctx.Malformed(inst, "the result is not a token");
      return Status::Ok();
    case Opcode::kSend:
      HLOCACHE_RETURN_IF_ERROR(CheckChannel(ctx, inst));
      if (operands.size() != 2 || !IsToken(*operands[1])) {
        return ctx.Malformed(inst, "takes a value and a token");
      }
      if (!IsValueAnd(r, {u32, TokenShape()}) ||
          !hlo::SameValues(r.tuple_elements[0], *operands[0])) {
        return ctx.Malformed(inst, "the result is not (the value, u32[], token)");
      }
      return Status::Ok();
    case Opcode::kRecv:
      HLOCACHE_RETURN_IF_ERROR(CheckChannel(ctx, inst));
      if (operands.size() != 1 || !IsToken(*operands[0]))
        return ctx.Malformed(inst, "takes a token");
      if (!IsValueAnd(r, {u32, TokenShape()})) {
        return ctx.Malformed(inst, "the result is not (value, u32[], token)");
      }
      return Status::Ok();
    case Opcode::kSendDone:
      HLOCACHE_RETURN_IF_ERROR(CheckChannel(ctx, inst));
      if (operands.size() != 1 || !IsValueAnd(*operands[0], {u32, TokenShape()})) {
        return ctx.Malformed(inst, "takes a send's (value, u32[], token)");
      }
      if (!IsToken(r)) return ctx.Malformed(inst, "the result is not a token");
      return Status::Ok();
    default:  // recv-done.
      HLOCACHE_RETURN_IF_ERROR(CheckChannel(ctx, inst));
      if (operands.size() != 1 || !IsValueAnd(*operands[0], {u32, TokenShape()})) {
        return ctx.Malformed(inst, "takes a recv's (value, u32[], token)");
      }
      if (!IsValueAnd(r, {TokenShape()}) ||
          !hlo::SameValues(r.tuple_elements[0], operands[0]->tuple_elements[0])) {
        return ctx.Malformed(inst, "the result is not (the value received, token)");
      }
      return Status::Ok();
  }
}

Literal Token() { return Literal(TokenShape()); }

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

OpFamily HostOps() { return {Takes, Check, Eval}; }

}  // namespace hlocache::interp
