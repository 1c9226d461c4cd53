// `hlocache compile`, `hlocache run` and the worker they (and the server) start,
// `hlocache compile-worker`.
#include <unistd.h>

#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "client/cache.h"
#include "client/commands.h"
#include "common/fast_hash.h"
#include "common/file.h"
#include "compiler/artifact/execute.h"
#include "compiler/artifact/loader.h"
#include "compiler/build.h"
#include "compiler/codegen/cpu_codegen.h"
#include "compiler/cuda/cuda_runtime.h"
#include "compiler/hlo/parser.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/arguments.h"
#include "compiler/semantics/numerics.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
#include "compiler/worker_pool.h"

namespace hlocache::client {
namespace {

using interp::Literal;

// A file's bytes; "-" reads standard input.
Result<std::string> ReadInput(const std::string& path) {
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  return ReadWholeFile(path);
}

Status WriteOutput(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return IoError(path + ": cannot be written");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return IoError(path + ": cannot be written");
  }
  return Status::Ok();
}

struct Compiled {
  std::string key;
  std::string artifact;
  double seconds = 0;
  std::string from;  // Where it came from, with --cache.
};

// Through the cache named by --cache: a hit anywhere, or a compile by a server or here.
Result<Compiled> CompileThroughCache(const std::string& text, const CompileSettings& settings) {
  CacheOptions options = CacheOptions::FromEnvironment();
  options.worker_binary = CurrentExecutable();
  options.cxx = settings.cxx;
  options.compile_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(settings.timeout_seconds * 1000));
  HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<Cache> cache, Cache::Open(settings.cache, options));
  HLOCACHE_ASSIGN_OR_RETURN(Executable exe, cache->GetOrCompile(text, settings.target));
  cache->Flush();  // The write-back finishes before this short-lived process exits.
  Compiled out{exe.key, *exe.artifact, exe.total_seconds, std::string(SourceName(exe.source))};
  if (!exe.tier.empty()) out.from += " (" + exe.tier + ")";
  return out;
}

// Keys the module for the toolchain that will build it, then compiles it in a worker process.
Result<Compiled> CompileThroughWorker(const std::string& file, const std::string& text,
                                      const hlo::Module& module, const CompileSettings& settings) {
  compiler::ToolchainOptions toolchain_options;
  toolchain_options.cxx = settings.cxx;
  HLOCACHE_ASSIGN_OR_RETURN(compiler::Toolchain toolchain,
                            compiler::Toolchain::Probe(toolchain_options));
  keying::KeySettings key_settings;
  key_settings.target = settings.target;
  key_settings.compiler_id = compiler::CompilerIdFor(settings.target, toolchain.CompilerId());
  auto keyed = keying::KeyModule(module, key_settings);
  if (!keyed) {
    if (keyed.error().message().find("elided") != std::string::npos) {
      return Error(FailedPrecondition(keyed.error().message() +
                                      "; a module with elided constants cannot be compiled"));
    }
    return Error(keyed.error());
  }
  compiler::WorkerPoolOptions options;
  options.worker_binary = CurrentExecutable();
  options.worker_args = {"--cxx", toolchain.cxx_path().string()};
  options.workers = 1;
  options.timeout =
      std::chrono::milliseconds(static_cast<int64_t>(settings.timeout_seconds * 1000));
  compiler::WorkerPool pool(options);
  compiler::CompileRequest request{keyed->key.text, text, keyed->target, file};
  HLOCACHE_ASSIGN_OR_RETURN(compiler::CompileOutcome outcome, pool.Compile(request));
  return Compiled{keyed->key.text, std::move(outcome.artifact), outcome.seconds};
}

struct Ran {
  std::vector<std::string> results;  // Each result leaf's bytes.
  double run_ms = 0;
};

// Runs an artifact on this host's CPU, or on its GPU for a GPU executable.
Result<Ran> Execute(std::string_view artifact, const compiler::EntryLeaves& abi,
                    std::span<const Literal> inputs, interp::HostTransfers* host,
                    std::ostream& out) {
  HLOCACHE_ASSIGN_OR_RETURN(compiler::DecodedArtifact decoded, compiler::DecodeArtifact(artifact));
  if (decoded.header.payload_kind == compiler::kPayloadCubinPlan) {
    HLOCACHE_ASSIGN_OR_RETURN(compiler::CudaPayload payload,
                              compiler::DecodeCudaPayload(decoded.payload));
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string> in, compiler::ArgumentBytes(abi, inputs));
    HLOCACHE_ASSIGN_OR_RETURN(compiler::CudaRun run,
                              compiler::RunCudaPlan(payload, in, abi.results));
    out << "device: " << run.device << "\n";
    return Ran{std::move(run.results), run.run_ms};
  }
  HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<compiler::LoadedExecutable> loaded,
                            compiler::LoadedExecutable::Load(artifact));
  const auto start = std::chrono::steady_clock::now();
  Ran run;
  HLOCACHE_ASSIGN_OR_RETURN(run.results, compiler::Execute(*loaded, abi, inputs, host));
  run.run_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return run;
}

}  // namespace

int RunCompileWorker(const WorkerSettings& settings, std::ostream& err) {
  auto fail = [&](const Status& s) {
    err << s.ToString() << "\n";
    return 1;
  };
  auto text = ReadInput(settings.input);
  if (!text) return fail(text.error());
  auto module = hlo::ParseModule(std::move(*text), settings.name);
  if (!module) return fail(module.error());
  compiler::ToolchainOptions options;
  options.cxx = settings.cxx;
  options.temp_root = settings.temp_root;
  options.memory_limit_bytes = settings.memory_limit_bytes;
  options.own_process_group = false;  // Killing this worker's group kills its compilers.
  auto toolchain = compiler::Toolchain::Probe(options);
  if (!toolchain) return fail(toolchain.error());
  auto artifact = compiler::BuildArtifact(*module, *toolchain, {settings.key, settings.target});
  if (!artifact) return fail(artifact.error());
  if (Status s = WriteOutput(settings.output, *artifact); !s.ok()) return fail(s);
  return 0;
}

int RunCompile(const std::string& file, const CompileSettings& settings, std::ostream& out,
               std::ostream& err) {
  auto text = ReadInput(file);
  if (!text) {
    err << "hlocache compile: " << text.error().message() << "\n";
    return 1;
  }
  auto module = hlo::ParseModule(*text, file);
  if (!module) {
    err << module.error().message() << "\n";
    return 1;
  }
  auto compiled = settings.cache.empty() ? CompileThroughWorker(file, *text, *module, settings)
                                         : CompileThroughCache(*text, settings);
  if (!compiled) {
    err << compiled.error().message() << "\n";
    return 1;
  }
  std::string path = settings.output;
  if (path.empty()) path = compiled->key + ".hloart";
  if (Status s = WriteOutput(path, compiled->artifact); !s.ok()) {
    err << "hlocache compile: " << s.message() << "\n";
    return 1;
  }
  out << compiled->key << "  " << path << "  " << compiled->artifact.size() << " bytes  "
      << std::fixed << std::setprecision(2) << compiled->seconds << " s";
  if (!compiled->from.empty()) out << "  from: " << compiled->from;
  out << "\n";
  return 0;
}

int RunRun(const std::string& file, const CompileSettings& compile, const RunSettings& settings,
           std::ostream& out, std::ostream& err) {
  auto fail = [&](const std::string& message) {
    err << message << "\n";
    return 1;
  };
  auto text = ReadInput(file);
  if (!text) return fail("hlocache run: " + text.error().message());
  auto module = hlo::ParseModule(*text, file);
  if (!module) return fail(module.error().message());
  auto abi = compiler::EntryLeavesOf(*module);
  if (!abi) return fail(abi.error().message());
  if (settings.inputs != "random" && settings.inputs != "zeros") {
    return fail("hlocache run: --inputs must be random or zeros, not '" + settings.inputs + "'");
  }
  auto inputs = interp::MakeArguments(
      *module,
      settings.inputs == "zeros" ? interp::ArgumentFill::kZeros : interp::ArgumentFill::kRandom,
      settings.seed);
  if (!inputs) return fail("hlocache run: " + inputs.error().message());

  std::string artifact;
  if (!settings.artifact.empty()) {
    auto bytes = ReadInput(settings.artifact);
    if (!bytes) return fail("hlocache run: " + bytes.error().message());
    artifact = std::move(*bytes);
  } else {
    auto compiled = compile.cache.empty() ? CompileThroughWorker(file, *text, *module, compile)
                                          : CompileThroughCache(*text, compile);
    if (!compiled) return fail(compiled.error().message());
    artifact = std::move(compiled->artifact);
    if (!compiled->from.empty()) out << "from: " << compiled->from << "\n";
  }
  // Infeed, outfeed and host sends and recvs transfer with a host that answers with seeded
  // random values (as the inputs are made) and records what the program sends.
  interp::RecordingHost host(settings.seed);
  auto ran = Execute(artifact, *abi, *inputs, &host, out);
  if (!ran) return fail("hlocache run: " + ran.error().message());
  const std::vector<std::string>& out_bytes = ran->results;
  const double run_ms = ran->run_ms;
  auto print_hash = [&](const std::string& bytes) {
    const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
    out << "  xxh3=" << std::hex << std::setw(16) << std::setfill('0') << h.high64 << std::setw(16)
        << h.low64 << std::dec << std::setfill(' ') << "\n";
  };
  for (size_t k = 0; k < out_bytes.size(); ++k) {
    out << "result " << k << "  " << hlo::CanonicalShapeText(abi->results[k]);
    print_hash(out_bytes[k]);
  }
  for (size_t i = 0; i < host.sent().size(); ++i) {
    const interp::RecordingHost::Transfer& t = host.sent()[i];
    for (size_t k = 0; k < t.leaves.size(); ++k) {
      out << "sent " << i << "." << k
          << (t.kind == interp::HostTransferKind::kFeed
                  ? std::string("  outfeed  ")
                  : "  channel " + std::to_string(t.channel) + "  ")
          << hlo::CanonicalShapeText(t.leaves[k].shape());
      print_hash(interp::ToBytes(t.leaves[k]));
    }
  }
  if (!host.received().empty()) {
    out << "received " << host.received().size() << " values from the host\n";
  }
  out << "ran in " << std::fixed << std::setprecision(3) << run_ms << " ms\n";
  if (!settings.check) return 0;

  const auto interp_start = std::chrono::steady_clock::now();
  interp::RecordingHost interp_host(settings.seed);
  auto expected = interp::Evaluate(*module, *inputs, &interp_host);
  if (!expected) return fail("hlocache run --check: " + expected.error().message());
  const double interp_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - interp_start)
          .count();
  std::vector<const Literal*> want;
  interp::FlattenLeaves(*expected, want);
  auto compared = interp::CompareWithInterpreter(want, out_bytes, *module);
  if (!compared) return fail("hlocache run --check: " + compared.error().message());
  if (compared->mismatched != 0) err << compared->first_mismatch << "\n";
  const interp::ModuleTolerance tolerance = interp::StatedModuleTolerance();
  if (const std::string differs = interp::CompareSent(interp_host, host); !differs.empty()) {
    err << "sent to the host: " << differs << "\n";
    ++compared->mismatched;
  }
  out << "check: " << (compared->mismatched == 0 ? "match" : "MISMATCH") << ", "
      << compared->identical << " of " << compared->elements << " elements identical, largest "
      << "float error " << std::defaultfloat << std::setprecision(3) << compared->max_ulps
      << " ulp, " << compared->mismatched
      << " outside tolerance (schema/numerics.tsv: integers exact; floats " << tolerance.relative
      << " relative, " << tolerance.absolute << " absolute); interpreter " << std::fixed
      << std::setprecision(3) << interp_ms << " ms\n";
  return compared->mismatched == 0 ? 0 : 1;
}

}  // namespace hlocache::client
