#include "compiler/hlo/attributes.h"

#include "compiler/hlo/word_table.h"

namespace hlocache::hlo {
namespace {

constexpr std::string_view kInstructionAttributes[] = {
    "algorithm",
    "api_version",
    "async_execution_thread",
    "backend_config",
    "batch_group_count",
    "body",
    "branch_computations",
    "called_computations",
    "calls",
    "channel_id",
    "collapsed_slice_dims",
    "condition",
    "constrain_layout",
    "control-predecessors",
    "conv_kind",
    "cross_program_prefetch_index",
    "custom_call_has_side_effect",
    "custom_call_target",
    "delta",
    "dim_labels",
    "dimensions",
    "direction",
    "distribution",
    "domain",
    "dynamic_slice_sizes",
    "epsilon",
    "exponent_bits",
    "false_computation",
    "feature_group_count",
    "feature_index",
    "fft_length",
    "fft_type",
    "frontend_attributes",
    "index",
    "index_vector_dim",
    "indices_are_sorted",
    "infeed_config",
    "inferred_dimension",
    "input_batching_dims",
    "inserted_window_dims",
    "iota_dimension",
    "is_associative",
    "is_composite",
    "is_host_transfer",
    "is_reverse",
    "is_stable",
    "k",
    "kind",
    "largest",
    "left_side",
    "lhs_batch_dims",
    "lhs_contracting_dims",
    "lhs_ragged_dims",
    "literal",
    "lower",
    "mantissa_bits",
    "metadata",
    "mode",
    "num_carries",
    "offset_dims",
    "operand_batching_dims",
    "operand_layout_constraints",
    "operand_precision",
    "origin",
    "outfeed_config",
    "outfeed_shape",
    "output_to_operand_aliasing",
    "padding",
    "padding_type",
    "parameter_replication",
    "replica_groups",
    "result_accuracy",
    "rhs_batch_dims",
    "rhs_contracting_dims",
    "rhs_group_dims",
    "scatter",
    "scatter_dims_to_operand_dims",
    "scatter_indices_batching_dims",
    "schedule",
    "select",
    "sharding",
    "slice",
    "slice_sizes",
    "source_target_pairs",
    "start_index_map",
    "start_indices_batching_dims",
    "statistics",
    "to_apply",
    "transpose_a",
    "true_computation",
    "type",
    "unique_indices",
    "unit_diagonal",
    "update_window_dims",
    "use_global_device_ids",
    "window",
};

constexpr std::string_view kModuleAttributes[] = {
    "alias_passthrough_params",
    "allow_spmd_sharding_propagation_to_output",
    "allow_spmd_sharding_propagation_to_parameters",
    "buffer_donor",
    "entry_computation_layout",
    "frontend_attributes",
    "input_output_alias",
    "is_scheduled",
    "num_partitions",
    "origin_recovery_table",
    "replica_count",
};

constexpr std::string_view kCalleeAttributes[] = {
    "body",
    "branch_computations",
    "called_computations",
    "calls",
    "condition",
    "false_computation",
    "scatter",
    "select",
    "to_apply",
    "true_computation",
};

}  // namespace

bool IsKnownInstructionAttribute(std::string_view name) {
  return InstructionAttributeIndex(name) >= 0;
}
std::span<const std::string_view> InstructionAttributeNames() { return kInstructionAttributes; }
int InstructionAttributeIndex(std::string_view name) {
  static const WordTable table(kInstructionAttributes);
  return table.Find(name);
}
bool IsKnownModuleAttribute(std::string_view name) {
  static const WordTable table(kModuleAttributes);
  return table.Find(name) >= 0;
}
bool IsCalleeAttribute(std::string_view name) {
  static const WordTable table(kCalleeAttributes);
  return table.Find(name) >= 0;
}
bool IsDebugOnlyAttribute(std::string_view name) {
  return name == "metadata" || name == "statistics" || name == "origin";
}

}  // namespace hlocache::hlo
