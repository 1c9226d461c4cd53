#include "compiler/artifact/execute.h"

#include <algorithm>

#include "compiler/interp/arguments.h"

namespace hlocache::compiler {

Result<std::vector<std::string>> ArgumentBytes(const EntryLeaves& leaves,
                                               std::span<const interp::Literal> arguments) {
  std::vector<const interp::Literal*> in;
  for (const interp::Literal& a : arguments) interp::FlattenLeaves(a, in);
  if (in.size() != leaves.parameters.size()) {
    return Error(InvalidArgument(std::to_string(in.size()) + " argument arrays for " +
                                 std::to_string(leaves.parameters.size()) + " parameters"));
  }
  std::vector<std::string> in_bytes;
  for (size_t j = 0; j < in.size(); ++j) {
    if (in[j]->type() != leaves.parameters[j].type ||
        in[j]->shape().dims != leaves.parameters[j].dims) {
      return Error(InvalidArgument("argument array " + std::to_string(j) + " is " +
                                   hlo::CanonicalShapeText(in[j]->shape()) + ", not " +
                                   hlo::CanonicalShapeText(leaves.parameters[j])));
    }
    in_bytes.push_back(interp::ToBytes(*in[j]));
  }
  return in_bytes;
}

Result<std::vector<std::string>> Execute(const LoadedExecutable& executable,
                                         const EntryLeaves& leaves,
                                         std::span<const interp::Literal> arguments) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string> in_bytes, ArgumentBytes(leaves, arguments));
  std::vector<const void*> params;
  for (const std::string& b : in_bytes) params.push_back(b.data());
  std::vector<std::string> out;
  for (const hlo::Shape& s : leaves.results) {
    const int64_t n = s.ElementCount().value_or(0);
    out.emplace_back(static_cast<size_t>(n * hlo::BufferElementBytes(s.type)), '\0');
  }
  std::vector<void*> results;
  for (std::string& b : out) results.push_back(b.data());
  auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>(executable.entry());
  if (entry(params.data(), results.data()) != 0) {
    return Error(ResourceExhausted("the executable could not allocate its buffers"));
  }
  return out;
}

}  // namespace hlocache::compiler
