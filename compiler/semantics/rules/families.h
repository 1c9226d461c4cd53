// The shape rules of the op families beyond the core (compiler/semantics/core_ops.h), one file
// each in this folder, and what the interpreter's evaluation of them reads through the same
// code (an attribute checked once, a geometry computed once). Internal to compiler/semantics and
// compiler/interp; shape_rules.h is the interface for everyone else.
//
// A family's rules refuse, with kInvalidArgument naming file:line, every shape its evaluation
// would index out of bounds with (the parser infers nothing, so a module may claim any shape),
// and, with kFailedPrecondition, well-formed input outside what hlocache implements.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/convolution_dims.h"
#include "compiler/hlo/module.h"
#include "compiler/hlo/window.h"
#include "compiler/semantics/shape_context.h"

namespace hlocache::interp {

// One family's rules: which opcodes it takes, and their check. `operands` are the operands'
// shapes, in order (tuples included: several families take and return tuples).
struct ShapeRules {
  bool (*takes)(hlo::Opcode op);
  Status (*check)(const ShapeContext& ctx, const hlo::Instruction& inst,
                  std::span<const hlo::Shape* const> operands);
};

ShapeRules CollectiveRules();     // collectives.cc: all-reduce, all-gather, ..., replica-id.
ShapeRules GatherScatterRules();  // gather_scatter.cc: gather, scatter.
ShapeRules ControlRules();        // control.cc: while, conditional, map.
ShapeRules ScanRules();           // scan.cc: scan.
ShapeRules WrapperRules();        // wrappers.cc: tokens, async and copy wrappers, domains.
ShapeRules ElementwiseRules();    // elementwise.cc: the elementwise ops beyond the core.
ShapeRules SortRules();           // sort.cc: sort, topk.
ShapeRules WindowRules();         // window.cc: reduce-window, select-and-scatter.
ShapeRules ConvolutionRules();    // convolution.cc: convolution.
ShapeRules BatchNormRules();      // batch_norm.cc: batch-norm-training, -inference, -grad.
ShapeRules RngRules();            // rng.cc: rng-bit-generator, rng-get-and-update-state, rng.
ShapeRules LinalgRules();         // linalg.cc: cholesky, triangular-solve.
ShapeRules DotRules();            // dots.cc: scaled-dot, ragged-dot.
ShapeRules HostRules();           // host.cc: infeed, outfeed, host send and recv.
ShapeRules DynamicRules();        // dynamic.cc: set-/get-dimension-size, dynamic-reshape.

// Whether one of the families takes `op`.
bool IsExtendedOp(hlo::Opcode op);

// The rules of `inst`'s family; kFailedPrecondition when no family takes its opcode.
Status CheckExtendedShapes(const ShapeContext& ctx, const hlo::Instruction& inst,
                           std::span<const hlo::Shape* const> operands);

// ---- What evaluation reads through the rules' code ---------------------------------------------

// batch_norm.cc: the epsilon attribute as the float XLA keeps it.
Result<double> BatchNormEpsilon(const ShapeContext& ctx, const hlo::Instruction& inst);

// collectives.cc: the shape a collective of these operands returns with one participant (the
// operand's, or the tuple of them when there are several); whether `op` is a -done form; and
// where a -done finds its result in its operand, the -start's value `started`: the value itself,
// or element 1 of the (operand, result, ...) tuple that older -start forms return.
hlo::Shape CollectiveResult(std::span<const hlo::Shape* const> operands);
bool IsCollectiveDone(hlo::Opcode op);
enum class CollectiveDoneFrom { kItself, kElementOne };
Result<CollectiveDoneFrom> CollectiveDoneSource(const ShapeContext& ctx,
                                                const hlo::Instruction& inst,
                                                const hlo::Shape& started);

// control.cc: the branches of a conditional, in the order its selector picks them: {true,
// false} for the predicate form (a pred selector picks 0 when true), branch_computations
// otherwise.
Result<std::vector<int32_t>> ConditionalBranches(const ShapeContext& ctx,
                                                 const hlo::Instruction& inst);

// convolution.cc: everything a convolution's evaluation needs, read and checked once.
struct ConvolutionGeometry {
  hlo::ConvolutionDims dims;
  std::vector<hlo::WindowDimension> window;
  int64_t feature_groups = 1, batch_groups = 1;
  int64_t groups = 1;              // max(feature_groups, batch_groups)
  int64_t outputs_per_group = 0;   // Output features per group.
  int64_t kernel_in_features = 0;  // Input features each output sums over.
  int64_t output_batch = 0;
};
Result<ConvolutionGeometry> ReadConvolutionGeometry(const ShapeContext& ctx,
                                                    const hlo::Instruction& inst,
                                                    const hlo::Shape& input,
                                                    const hlo::Shape& kernel);

// dynamic.cc: the one dimension (of an operand of rank `rank`) that dimensions={d} names.
Result<size_t> DynamicOpDimension(const ShapeContext& ctx, const hlo::Instruction& inst,
                                  size_t rank);

// scan.cc: an array shape without dimension `d`; what a scan's attributes and shapes say, once
// checked.
hlo::Shape ShapeWithoutDimension(const hlo::Shape& s, int64_t d);
struct ScanForm {
  int64_t dim = 0;
  int64_t length = 0;  // L: the inputs' (and outputs') size along `dim`.
  size_t inputs = 0;
  size_t carries = 0;
  size_t outputs = 0;
  bool reverse = false;
  bool tuple_result = false;
  std::vector<hlo::Shape> output_arrays;  // The result's output arrays, in order.
};
Result<ScanForm> ReadScanForm(const ShapeContext& ctx, const hlo::Instruction& inst,
                              std::span<const hlo::Shape* const> operands);

// window.cc: the window of a windowed op over `base`'s dimensions, and the number of its
// placements along each.
Status ReadWindowPlacements(const ShapeContext& ctx, const hlo::Instruction& inst,
                            std::span<const int64_t> base,
                            std::vector<hlo::WindowDimension>& window,
                            std::vector<int64_t>& placements);

}  // namespace hlocache::interp
