#include "compiler/artifact/execute.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "compiler/artifact/host_abi.h"
#include "compiler/semantics/dynamic_shapes.h"

#include "compiler/semantics/arguments.h"

namespace hlocache::compiler {

namespace {

// For each element of an array of sizes `dims`, in row-major order, its index in a buffer laid
// out by `bounds` (generated code's layout of dynamic shapes, interp/dynamic_shapes.h).
std::vector<size_t> PaddedIndices(std::span<const int64_t> dims, std::span<const int64_t> bounds) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  std::vector<size_t> out(static_cast<size_t>(count));
  const auto strides = hlo::RowMajorStrides(bounds);
  std::vector<int64_t> index(dims.size(), 0);
  for (size_t n = 0; n < out.size(); ++n) {
    int64_t at = 0;
    for (size_t k = 0; k < dims.size(); ++k) at += index[k] * strides[k];
    out[n] = static_cast<size_t>(at);
    for (size_t k = dims.size(); k-- > 0;) {
      if (++index[k] < dims[k]) break;
      index[k] = 0;
    }
  }
  return out;
}

// An array of a dynamic shape as generated code holds it: its elements laid out by the bounds
// (zeros between), then its sizes as int32s.
std::string Padded(const hlo::Shape& declared, const interp::Literal& value) {
  const auto width = static_cast<size_t>(hlo::BufferElementBytes(declared.type));
  const std::string compact = interp::ToBytes(value);
  std::string out(static_cast<size_t>(*declared.BoundElementCount()) * width, '\0');
  const std::vector<size_t> at = PaddedIndices(value.shape().dims, declared.dims);
  for (size_t n = 0; n < at.size(); ++n) {
    std::memcpy(&out[at[n] * width], &compact[n * width], width);
  }
  for (int64_t d : value.shape().dims) {
    const auto size = static_cast<int32_t>(d);
    out.append(reinterpret_cast<const char*>(&size), sizeof size);
  }
  return out;
}

// The compact bytes of a dynamic result from its padded buffer (sizes clamped to the bounds).
std::string Compacted(const hlo::Shape& declared, const std::string& padded) {
  const auto width = static_cast<size_t>(hlo::BufferElementBytes(declared.type));
  const size_t data = static_cast<size_t>(*declared.BoundElementCount()) * width;
  std::vector<int64_t> dims(declared.dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    int32_t size;
    std::memcpy(&size, padded.data() + data + 4 * k, sizeof size);
    dims[k] = interp::ClampedSize(size, declared.dims[k]);
  }
  std::string out;
  for (size_t at : PaddedIndices(dims, declared.dims)) out.append(padded, at * width, width);
  return out;
}

}  // namespace

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
    const hlo::Shape& declared = leaves.parameters[j];
    if (declared.IsDynamic()
            ? !interp::Admits(declared, in[j]->shape())
            : in[j]->type() != declared.type || in[j]->shape().dims != declared.dims) {
      return Error(InvalidArgument("argument array " + std::to_string(j) + " is " +
                                   hlo::CanonicalShapeText(in[j]->shape()) + ", not " +
                                   hlo::CanonicalShapeText(declared)));
    }
    in_bytes.push_back(declared.IsDynamic() ? Padded(declared, *in[j]) : interp::ToBytes(*in[j]));
  }
  return in_bytes;
}

namespace {

// A run's host as the generated code calls it: the HostTransfers it adapts, and the first
// failure of a transfer.
struct HostAdapter {
  interp::HostTransfers* host;
  Status failure = Status::Ok();
};

Result<hlo::Shape> LeafShape(const hlocache_host_leaf& leaf) {
  const auto type = hlo::PrimitiveTypeFromName(leaf.type == nullptr ? "" : leaf.type);
  if (!type || leaf.rank < 0) return Error(InvalidArgument("a transfer of an unknown array"));
  hlo::Shape s;
  s.type = *type;
  s.dims.assign(leaf.dims, leaf.dims + leaf.rank);
  return s;
}

// The transfer's value: its one array, or a tuple of its arrays.
Result<hlo::Shape> ValueShape(int64_t count, const hlocache_host_leaf* leaves) {
  if (count == 1) return LeafShape(leaves[0]);
  hlo::Shape tuple;
  for (int64_t k = 0; k < count; ++k) {
    HLOCACHE_ASSIGN_OR_RETURN(hlo::Shape s, LeafShape(leaves[k]));
    tuple.tuple_elements.push_back(std::move(s));
  }
  return tuple;
}

Status Receive(HostAdapter& a, int kind, int64_t channel, int64_t count,
               const hlocache_host_leaf* leaves) {
  HLOCACHE_ASSIGN_OR_RETURN(hlo::Shape shape, ValueShape(count, leaves));
  HLOCACHE_ASSIGN_OR_RETURN(
      interp::Literal value,
      a.host->Receive(static_cast<interp::HostTransferKind>(kind), channel, shape));
  std::vector<const interp::Literal*> arrays;
  interp::FlattenLeaves(value, arrays);
  if (arrays.size() != static_cast<size_t>(count)) {
    return InvalidArgument("the host gave " + std::to_string(arrays.size()) + " arrays for " +
                           std::to_string(count));
  }
  for (int64_t k = 0; k < count; ++k) {
    const std::string bytes = interp::ToBytes(*arrays[static_cast<size_t>(k)]);
    if (static_cast<int64_t>(bytes.size()) != leaves[k].bytes) {
      return InvalidArgument("the host gave " + std::to_string(bytes.size()) + " bytes for " +
                             std::to_string(leaves[k].bytes));
    }
    std::memcpy(leaves[k].data, bytes.data(), bytes.size());
  }
  return Status::Ok();
}

Status Send(HostAdapter& a, int kind, int64_t channel, int64_t count,
            const hlocache_host_leaf* leaves) {
  HLOCACHE_ASSIGN_OR_RETURN(hlo::Shape shape, ValueShape(count, leaves));
  std::vector<interp::Literal> arrays;
  for (int64_t k = 0; k < count; ++k) {
    HLOCACHE_ASSIGN_OR_RETURN(hlo::Shape s, LeafShape(leaves[k]));
    HLOCACHE_ASSIGN_OR_RETURN(
        interp::Literal l,
        interp::FromBytes(s, std::string_view(static_cast<const char*>(leaves[k].data),
                                              static_cast<size_t>(leaves[k].bytes))));
    arrays.push_back(std::move(l));
  }
  interp::Literal value;
  if (count == 1) {
    value = std::move(arrays[0]);
  } else {
    value = interp::Literal(shape);
    for (size_t k = 0; k < arrays.size(); ++k) value.elements()[k] = std::move(arrays[k]);
  }
  return a.host->Send(static_cast<interp::HostTransferKind>(kind), channel, value);
}

// The callbacks the generated code calls: nothing may unwind through it, so an allocation that
// fails becomes the run's failure.
template <typename Transfer>
int Callback(void* context, Transfer transfer) {
  auto& a = *static_cast<HostAdapter*>(context);
  try {
    a.failure = transfer(a);
  } catch (const std::bad_alloc&) {
    a.failure = ResourceExhausted("out of memory transferring with the host");
  }
  return a.failure.ok() ? 0 : 1;
}

extern "C" int ReceiveFromHost(void* context, int kind, int64_t channel, int64_t count,
                               const hlocache_host_leaf* leaves) {
  return Callback(context,
                  [&](HostAdapter& a) { return Receive(a, kind, channel, count, leaves); });
}

extern "C" int SendToHost(void* context, int kind, int64_t channel, int64_t count,
                          const hlocache_host_leaf* leaves) {
  return Callback(context, [&](HostAdapter& a) { return Send(a, kind, channel, count, leaves); });
}

}  // namespace

Result<std::vector<std::string>> Execute(const LoadedExecutable& executable,
                                         const EntryLeaves& leaves,
                                         std::span<const interp::Literal> arguments,
                                         interp::HostTransfers* host) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string> in_bytes, ArgumentBytes(leaves, arguments));
  std::vector<const void*> params;
  for (const std::string& b : in_bytes) params.push_back(b.data());
  std::vector<std::string> out;
  for (const hlo::Shape& s : leaves.results) {
    // A dynamic result's buffer has room for its bounds, then its sizes.
    const int64_t n = s.BoundElementCount().value_or(0);
    out.emplace_back(static_cast<size_t>(n * hlo::BufferElementBytes(s.type)) +
                         (s.IsDynamic() ? 4 * s.dims.size() : 0),
                     '\0');
  }
  std::vector<void*> results;
  for (std::string& b : out) results.push_back(b.data());
  HostAdapter adapter{host};
  hlocache_host c_host{&adapter, ReceiveFromHost, SendToHost};
  int status;
  // Executables built before hosts were offered have only the plain entry point.
  auto with_host = executable.Symbol(kEntryWithHostSymbol);
  if (with_host) {
    auto entry = reinterpret_cast<int (*)(const void* const*, void* const*, const hlocache_host*)>(
        *with_host);
    status = entry(params.data(), results.data(), host == nullptr ? nullptr : &c_host);
  } else {
    auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>(executable.entry());
    status = entry(params.data(), results.data());
  }
  if (status == 2) {
    if (!adapter.failure.ok()) return Error(adapter.failure);
    return Error(FailedPrecondition(
        "the executable transfers with a host (infeed, outfeed, send or recv), and it was run "
        "without one"));
  }
  if (status != 0) {
    return Error(ResourceExhausted("the executable could not allocate its buffers"));
  }
  for (size_t k = 0; k < out.size(); ++k) {
    if (leaves.results[k].IsDynamic()) out[k] = Compacted(leaves.results[k], out[k]);
  }
  return out;
}

}  // namespace hlocache::compiler
