#include "compiler/hlo/convolution_dims.h"

#include <string>
#include <string_view>

namespace hlocache::hlo {
namespace {

Status BadLabels(std::string why) { return InvalidArgument("dim_labels: " + std::move(why)); }

// One label: the dimension of letter `first` and of letter `second`, and of each digit.
Status ReadLabel(std::string_view label, size_t rank, char first, char second, int64_t& a,
                 int64_t& b, std::vector<int64_t>& spatial) {
  const std::string quoted = "'" + std::string(label) + "'";
  if (label.size() != rank) {
    return BadLabels(quoted + " names " + std::to_string(label.size()) +
                     " dimensions, the operands have " + std::to_string(rank));
  }
  a = b = -1;
  spatial.assign(rank - 2, -1);
  for (size_t d = 0; d < rank; ++d) {
    const char c = label[d];
    int64_t* slot = nullptr;
    if (c == first) {
      slot = &a;
    } else if (c == second) {
      slot = &b;
    } else if (c >= '0' && c <= '9' && static_cast<size_t>(c - '0') < rank - 2) {
      slot = &spatial[static_cast<size_t>(c - '0')];
    }
    if (slot == nullptr || *slot >= 0) {
      return BadLabels(quoted + " is not a permutation of " + first + ", " + second +
                       " and the spatial dimensions");
    }
    *slot = static_cast<int64_t>(d);
  }
  return Status::Ok();
}

}  // namespace

Result<ConvolutionDims> ReadConvolutionDims(const Module& m, const Instruction& inst, size_t rank) {
  const Attribute* attr = inst.FindAttribute("dim_labels");
  if (attr == nullptr) return Error(BadLabels("absent"));
  if (rank < 2 || rank > 12) {
    return Error(
        BadLabels("operands of rank " + std::to_string(rank) + " (2 to 12 are supported)"));
  }
  std::string text;
  for (uint32_t t = attr->value.begin; t < attr->value.end; ++t) text += m.TokenText(t);
  const size_t underscore = text.find('_'), arrow = text.find("->");
  if (underscore == std::string::npos || arrow == std::string::npos || arrow < underscore) {
    return Error(BadLabels("'" + text + "' is not INPUT_KERNEL->OUTPUT"));
  }
  ConvolutionDims d;
  HLOCACHE_RETURN_IF_ERROR(ReadLabel(std::string_view(text).substr(0, underscore), rank, 'b', 'f',
                                     d.input_batch, d.input_feature, d.input_spatial));
  HLOCACHE_RETURN_IF_ERROR(
      ReadLabel(std::string_view(text).substr(underscore + 1, arrow - underscore - 1), rank, 'i',
                'o', d.kernel_input_feature, d.kernel_output_feature, d.kernel_spatial));
  HLOCACHE_RETURN_IF_ERROR(ReadLabel(std::string_view(text).substr(arrow + 2), rank, 'b', 'f',
                                     d.output_batch, d.output_feature, d.output_spatial));
  return d;
}

}  // namespace hlocache::hlo
