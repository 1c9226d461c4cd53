#include "compiler/artifact/cuda_payload.h"

#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>

namespace hlocache::compiler {
namespace {

constexpr std::string_view kCubinMagic = "HLOCUBIN";

using nlohmann::json;

Status Bad(const std::string& why) { return DataLoss("GPU payload: " + why); }

bool IsName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

}  // namespace

std::string EncodeCudaPayload(const CudaPlan& plan, std::string_view cubin) {
  json steps = json::array();
  for (const CudaStep& s : plan.steps) {
    if (!s.kernel.empty()) {
      steps.push_back(
          {{"kernel", s.kernel}, {"grid", s.grid}, {"block", s.block}, {"args", s.args}});
    } else {
      steps.push_back({{"copy", {s.from, s.to, s.bytes}}});
    }
  }
  const json j = {{"version", 1},
                  {"arch", plan.arch},
                  {"buffers", plan.buffer_bytes},
                  {"parameters", plan.parameters},
                  {"results", plan.results},
                  {"steps", steps}};
  const std::string text = j.dump();
  std::string out(kCubinMagic);
  const uint64_t n = text.size();
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
  out += text;
  out.append(cubin);
  return out;
}

Result<CudaPayload> DecodeCudaPayload(std::string_view payload) {
  if (payload.size() < 16 || payload.substr(0, 8) != kCubinMagic)
    return Error(Bad("no HLOCUBIN magic"));
  uint64_t n = 0;
  for (int b = 0; b < 8; ++b)
    n |= static_cast<uint64_t>(static_cast<uint8_t>(payload[8 + b])) << (8 * b);
  if (n > payload.size() - 16) return Error(Bad("the plan's length runs past the payload"));
  const json j = json::parse(payload.substr(16, n), nullptr, /*allow_exceptions=*/false);
  // Read without json::value(), which throws on a version of another type ("1").
  const auto version = j.is_object() ? j.find("version") : j.end();
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 1)
    return Error(Bad("the plan is not version 1 JSON"));
  CudaPayload out;
  out.cubin = std::string(payload.substr(16 + n));
  CudaPlan& plan = out.plan;
  auto ints = [&](const char* name, std::vector<int64_t>& to) {
    const auto it = j.find(name);
    if (it == j.end() || !it->is_array()) return false;
    for (const json& v : *it) {
      if (!v.is_number_integer()) return false;
      to.push_back(v.get<int64_t>());
    }
    return true;
  };
  if (!j.contains("arch") || !j["arch"].is_string() || !ints("buffers", plan.buffer_bytes) ||
      !ints("parameters", plan.parameters) || !ints("results", plan.results) ||
      !j.contains("steps") || !j["steps"].is_array()) {
    return Error(Bad("the plan lacks arch, buffers, parameters, results or steps"));
  }
  plan.arch = j["arch"].get<std::string>();
  const auto buffers = static_cast<int64_t>(plan.buffer_bytes.size());
  auto buffer = [&](int64_t b) { return b >= 0 && b < buffers; };
  for (int64_t bytes : plan.buffer_bytes) {
    if (bytes < 1) return Error(Bad("a buffer of " + std::to_string(bytes) + " bytes"));
  }
  for (int64_t b : plan.parameters) {
    if (!buffer(b)) return Error(Bad("a parameter names no buffer"));
  }
  for (int64_t b : plan.results) {
    if (!buffer(b)) return Error(Bad("a result names no buffer"));
  }
  for (const json& s : j["steps"]) {
    CudaStep step;
    if (s.contains("kernel")) {
      if (!s["kernel"].is_string() || !IsName(s["kernel"].get<std::string>())) {
        return Error(Bad("a kernel name that is not an identifier"));
      }
      step.kernel = s["kernel"].get<std::string>();
      for (const char* dims : {"grid", "block"}) {
        if (!s.contains(dims) || !s[dims].is_array() || s[dims].size() != 3) {
          return Error(Bad("a launch without 3 " + std::string(dims) + " dimensions"));
        }
        auto& to = std::string(dims) == "grid" ? step.grid : step.block;
        for (size_t k = 0; k < 3; ++k) {
          if (!s[dims][k].is_number_integer() || s[dims][k].get<int64_t>() < 1 ||
              s[dims][k].get<int64_t>() > (int64_t{1} << 31) - 1) {
            return Error(Bad("a launch dimension out of range"));
          }
          to[k] = s[dims][k].get<int64_t>();
        }
      }
      if (!s.contains("args") || !s["args"].is_array()) return Error(Bad("a launch without args"));
      for (const json& a : s["args"]) {
        if (!a.is_number_integer() || !buffer(a.get<int64_t>())) {
          return Error(Bad("a launch argument names no buffer"));
        }
        step.args.push_back(a.get<int64_t>());
      }
    } else {
      const auto it = s.find("copy");
      if (it == s.end() || !it->is_array() || it->size() != 3) {
        return Error(Bad("a step that is neither a launch nor a copy"));
      }
      for (const json& v : *it) {
        if (!v.is_number_integer()) return Error(Bad("a copy of non-integers"));
      }
      step.from = (*it)[0].get<int64_t>();
      step.to = (*it)[1].get<int64_t>();
      step.bytes = (*it)[2].get<int64_t>();
      if (!buffer(step.from) || !buffer(step.to) || step.bytes < 0 ||
          step.bytes > plan.buffer_bytes[static_cast<size_t>(step.from)] ||
          step.bytes > plan.buffer_bytes[static_cast<size_t>(step.to)]) {
        return Error(Bad("a copy out of its buffers"));
      }
    }
    plan.steps.push_back(std::move(step));
  }
  return out;
}

Result<std::string> CubinArch(std::string_view cubin) {
  // ELF64 little-endian: e_ident[EI_OSABI] at 7, EI_ABIVERSION at 8, e_machine at 18,
  // e_flags at 48.
  if (cubin.size() < 64 ||
      cubin.substr(0, 4) !=
          "\x7f"
          "ELF" ||
      cubin[4] != 2 || cubin[5] != 1) {
    return Error(DataLoss("the cubin is not a 64-bit little-endian ELF file"));
  }
  auto u16 = [&](size_t at) {
    return static_cast<uint32_t>(static_cast<uint8_t>(cubin[at])) |
           static_cast<uint32_t>(static_cast<uint8_t>(cubin[at + 1])) << 8;
  };
  const uint32_t machine = u16(18);
  const uint32_t flags = u16(48) | u16(50) << 16;
  constexpr uint32_t kEmCuda = 190;
  constexpr uint8_t kOsAbiCuda = 0x41;
  if (machine != kEmCuda || static_cast<uint8_t>(cubin[7]) != kOsAbiCuda) {
    return Error(
        DataLoss("the ELF file is not for a CUDA GPU (machine " + std::to_string(machine) + ")"));
  }
  // The SM number sits in bits 8-15 of e_flags from ELF ABI version 8 (CUDA 12.8 on), in bits
  // 0-7 before.
  const uint32_t sm = static_cast<uint8_t>(cubin[8]) >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
  return "sm_" + std::to_string(sm);
}

}  // namespace hlocache::compiler
