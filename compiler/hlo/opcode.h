// HLO opcodes: every opcode of XLA's HLO instruction set, by its text name.
//
// Async sugar (`<op>-start`, `<op>-update`, `<op>-done` for an op that has no native async form,
// e.g. `custom-call-start`) is represented as the wrapped opcode plus an AsyncPhase, so that the
// printed form round-trips.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace hlocache::hlo {

// X(enum name, text name)
#define HLOCACHE_OPCODE_LIST(X)                          \
  X(kAbs, "abs")                                         \
  X(kAcos, "acos")                                       \
  X(kAcosh, "acosh")                                     \
  X(kAdd, "add")                                         \
  X(kAddDependency, "add-dependency")                    \
  X(kAfterAll, "after-all")                              \
  X(kAllGather, "all-gather")                            \
  X(kAllGatherDone, "all-gather-done")                   \
  X(kAllGatherStart, "all-gather-start")                 \
  X(kAllReduce, "all-reduce")                            \
  X(kAllReduceDone, "all-reduce-done")                   \
  X(kAllReduceStart, "all-reduce-start")                 \
  X(kAllToAll, "all-to-all")                             \
  X(kAnd, "and")                                         \
  X(kAsin, "asin")                                       \
  X(kAsinh, "asinh")                                     \
  X(kAsyncDone, "async-done")                            \
  X(kAsyncStart, "async-start")                          \
  X(kAsyncUpdate, "async-update")                        \
  X(kAtan, "atan")                                       \
  X(kAtan2, "atan2")                                     \
  X(kAtanh, "atanh")                                     \
  X(kBatchNormGrad, "batch-norm-grad")                   \
  X(kBatchNormInference, "batch-norm-inference")         \
  X(kBatchNormTraining, "batch-norm-training")           \
  X(kBitcast, "bitcast")                                 \
  X(kBitcastConvert, "bitcast-convert")                  \
  X(kBroadcast, "broadcast")                             \
  X(kCall, "call")                                       \
  X(kCbrt, "cbrt")                                       \
  X(kCeil, "ceil")                                       \
  X(kCholesky, "cholesky")                               \
  X(kClamp, "clamp")                                     \
  X(kClz, "count-leading-zeros")                         \
  X(kCollectiveBroadcast, "collective-broadcast")        \
  X(kCollectivePermute, "collective-permute")            \
  X(kCollectivePermuteDone, "collective-permute-done")   \
  X(kCollectivePermuteStart, "collective-permute-start") \
  X(kCollectiveReduce, "collective-reduce")              \
  X(kCompare, "compare")                                 \
  X(kComplex, "complex")                                 \
  X(kConcatenate, "concatenate")                         \
  X(kConditional, "conditional")                         \
  X(kConstant, "constant")                               \
  X(kConvert, "convert")                                 \
  X(kConvolution, "convolution")                         \
  X(kCopy, "copy")                                       \
  X(kCopyDone, "copy-done")                              \
  X(kCopyStart, "copy-start")                            \
  X(kCos, "cosine")                                      \
  X(kCosh, "cosh")                                       \
  X(kCustomCall, "custom-call")                          \
  X(kDivide, "divide")                                   \
  X(kDomain, "domain")                                   \
  X(kDot, "dot")                                         \
  X(kDynamicReshape, "dynamic-reshape")                  \
  X(kDynamicSlice, "dynamic-slice")                      \
  X(kDynamicUpdateSlice, "dynamic-update-slice")         \
  X(kErf, "erf")                                         \
  X(kExp, "exponential")                                 \
  X(kExpm1, "exponential-minus-one")                     \
  X(kFft, "fft")                                         \
  X(kFloor, "floor")                                     \
  X(kFusion, "fusion")                                   \
  X(kGather, "gather")                                   \
  X(kGetDimensionSize, "get-dimension-size")             \
  X(kGetTupleElement, "get-tuple-element")               \
  X(kImag, "imag")                                       \
  X(kInfeed, "infeed")                                   \
  X(kIota, "iota")                                       \
  X(kIsFinite, "is-finite")                              \
  X(kLog, "log")                                         \
  X(kLog1p, "log-plus-one")                              \
  X(kLogistic, "logistic")                               \
  X(kMap, "map")                                         \
  X(kMaximum, "maximum")                                 \
  X(kMinimum, "minimum")                                 \
  X(kMulhi, "mulhi")                                     \
  X(kMultiply, "multiply")                               \
  X(kNegate, "negate")                                   \
  X(kNot, "not")                                         \
  X(kOptimizationBarrier, "opt-barrier")                 \
  X(kOr, "or")                                           \
  X(kOutfeed, "outfeed")                                 \
  X(kPad, "pad")                                         \
  X(kParameter, "parameter")                             \
  X(kPartitionId, "partition-id")                        \
  X(kPopulationCount, "popcnt")                          \
  X(kPower, "power")                                     \
  X(kRaggedAllToAll, "ragged-all-to-all")                \
  X(kRaggedDot, "ragged-dot")                            \
  X(kReal, "real")                                       \
  X(kRecv, "recv")                                       \
  X(kRecvDone, "recv-done")                              \
  X(kReduce, "reduce")                                   \
  X(kReducePrecision, "reduce-precision")                \
  X(kReduceScatter, "reduce-scatter")                    \
  X(kReduceWindow, "reduce-window")                      \
  X(kRemainder, "remainder")                             \
  X(kReplicaId, "replica-id")                            \
  X(kReshape, "reshape")                                 \
  X(kReverse, "reverse")                                 \
  X(kRng, "rng")                                         \
  X(kRngBitGenerator, "rng-bit-generator")               \
  X(kRngGetAndUpdateState, "rng-get-and-update-state")   \
  X(kRoundNearestAfz, "round-nearest-afz")               \
  X(kRoundNearestEven, "round-nearest-even")             \
  X(kRsqrt, "rsqrt")                                     \
  X(kScaledDot, "scaled-dot")                            \
  X(kScan, "scan")                                       \
  X(kScatter, "scatter")                                 \
  X(kSelect, "select")                                   \
  X(kSelectAndScatter, "select-and-scatter")             \
  X(kSend, "send")                                       \
  X(kSendDone, "send-done")                              \
  X(kSetDimensionSize, "set-dimension-size")             \
  X(kShiftLeft, "shift-left")                            \
  X(kShiftRightArithmetic, "shift-right-arithmetic")     \
  X(kShiftRightLogical, "shift-right-logical")           \
  X(kShuffle, "shuffle")                                 \
  X(kSign, "sign")                                       \
  X(kSin, "sine")                                        \
  X(kSinh, "sinh")                                       \
  X(kSlice, "slice")                                     \
  X(kSort, "sort")                                       \
  X(kSqrt, "sqrt")                                       \
  X(kStochasticConvert, "stochastic-convert")            \
  X(kSubtract, "subtract")                               \
  X(kTan, "tan")                                         \
  X(kTanh, "tanh")                                       \
  X(kTopK, "topk")                                       \
  X(kTranspose, "transpose")                             \
  X(kTriangularSolve, "triangular-solve")                \
  X(kTuple, "tuple")                                     \
  X(kWhile, "while")                                     \
  X(kXor, "xor")

enum class Opcode : uint8_t {
#define HLOCACHE_OPCODE_ENUM(e, s) e,
  HLOCACHE_OPCODE_LIST(HLOCACHE_OPCODE_ENUM)
#undef HLOCACHE_OPCODE_ENUM
};

// How many opcodes there are: Opcode values are 0 .. kOpcodeCount - 1.
inline constexpr int kOpcodeCount = 0
#define HLOCACHE_OPCODE_COUNT(e, s) +1
    HLOCACHE_OPCODE_LIST(HLOCACHE_OPCODE_COUNT)
#undef HLOCACHE_OPCODE_COUNT
    ;

// Async sugar phase for an opcode without a native async form.
enum class AsyncPhase : uint8_t { kNone, kStart, kUpdate, kDone };

std::string_view OpcodeName(Opcode op);

// infeed, outfeed, send, send-done, recv, recv-done: the ops that may talk to the host.
bool IsHostTransfer(Opcode op);

// The ops that act on the world outside the executable (host transfers, custom calls, the
// stateful rng): a code generator runs them, or refuses them, even when the root does not use
// their values.
bool HasEffects(Opcode op);

// Exact text name to opcode; nullopt for unknown names.
std::optional<Opcode> OpcodeFromName(std::string_view name);

// Parses an opcode as written in an instruction, including async sugar: "fusion-start" is
// {kFusion, kStart}. Native names ("all-gather-start") win over sugar.
struct OpcodeSpelling {
  Opcode opcode;
  AsyncPhase phase = AsyncPhase::kNone;
};
std::optional<OpcodeSpelling> ParseOpcodeSpelling(std::string_view text);

}  // namespace hlocache::hlo
