// libFuzzer target: any bytes as the payload of a GPU artifact (compiler/artifact/cuda_payload.h):
// a launch plan in JSON and a cubin, which a training process decodes after fetching the
// artifact. The artifact's checksum proves only that the bytes are the uploader's, so the plan
// is input like any other: decoding must refuse with one line or return a plan that holds
// together (every step within its buffers), never throw or crash; and a plan it returns must
// come back the same through EncodeCudaPayload. The architecture read from the cubin's ELF
// header likewise.
//
// The first byte chooses how the rest is used: as the payload as it is, or as the plan's JSON
// text (wrapped with the magic and its length) followed by nothing, so that mutations work on
// the JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "compiler/artifact/cuda_payload.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using hlocache::compiler::CudaPlan;

using hlocache::fuzzing::Check;

bool SamePlan(const CudaPlan& a, const CudaPlan& b) {
  if (a.arch != b.arch || a.buffer_bytes != b.buffer_bytes || a.parameters != b.parameters ||
      a.results != b.results || a.steps.size() != b.steps.size()) {
    return false;
  }
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const auto& x = a.steps[i];
    const auto& y = b.steps[i];
    if (x.kernel != y.kernel || x.grid != y.grid || x.block != y.block || x.args != y.args ||
        x.from != y.from || x.to != y.to || x.bytes != y.bytes) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string payload;
  if (data[0] & 1) {
    payload = std::string(rest);
  } else {
    payload = "HLOCUBIN";
    for (int b = 0; b < 8; ++b)
      payload.push_back(static_cast<char>((rest.size() >> (8 * b)) & 0xff));
    payload.append(rest);
  }
  (void)hlocache::compiler::CubinArch(payload);
  const auto decoded = hlocache::compiler::DecodeCudaPayload(payload);
  if (!decoded) {
    Check(decoded.error().message().find('\n') == std::string::npos);
    return 0;
  }
  const CudaPlan& plan = decoded->plan;
  const auto buffers = static_cast<int64_t>(plan.buffer_bytes.size());
  for (int64_t bytes : plan.buffer_bytes) Check(bytes >= 1);
  for (const auto& step : plan.steps) {
    if (!step.kernel.empty()) {
      for (int64_t a : step.args) Check(a >= 0 && a < buffers);
      for (int k = 0; k < 3; ++k) Check(step.grid[k] >= 1 && step.block[k] >= 1);
    } else {
      Check(step.from >= 0 && step.from < buffers && step.to >= 0 && step.to < buffers);
      Check(step.bytes >= 0 && step.bytes <= plan.buffer_bytes[step.from] &&
            step.bytes <= plan.buffer_bytes[step.to]);
    }
  }
  const auto again = hlocache::compiler::DecodeCudaPayload(
      hlocache::compiler::EncodeCudaPayload(plan, decoded->cubin));
  Check(again.has_value() && SamePlan(again->plan, plan) && again->cubin == decoded->cubin);
  return 0;
}
