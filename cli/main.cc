// `hlocache-full`: every `hlocache` command. `hlocache` (cli/front.cc) runs `key`, `canon` and
// `why` itself and hands every other command line here unchanged, by exec. Flags are parsed with
// CLI11; each subcommand is a function in client/commands.h or client/local_commands.h. Exit
// status: 0 success, 1 explained failure, 2 bad usage.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>

#include "cli/key_commands.h"
#include "client/commands.h"
#include "client/mount/mount_command.h"
#include "common/file.h"
#include "server/serve_command.h"

namespace {

int Main(int argc, char** argv) {
  using namespace hlocache::client;
  CLI::App app{hlocache::cli::kAppDescription};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hlocache 0.1.0");
  app.fallthrough();  // Its options may come after the subcommand too.
  std::string s3_endpoint;
  app.add_option("--s3-endpoint", s3_endpoint,
                 "S3 endpoint for s3:// tiers and upstreams (default: $AWS_ENDPOINT_URL_S3, "
                 "$AWS_ENDPOINT_URL, else AWS)");

  hlocache::cli::KeyCommands key_commands;
  hlocache::cli::AddKeyCommands(app, key_commands);
  std::string file_a;

  std::string store_dir, max_size;
  std::string health_url = "http://127.0.0.1:7070", health_ca_cert;
  CLI::App* health =
      app.add_subcommand("health", "exit 0 when a server answers /healthz (for health checks)");
  health->add_option("url", health_url, "the server")->capture_default_str();
  health->add_option("--ca-cert", health_ca_cert, "PEM file of the CA that signs an https server");
  CLI::App* stats = app.add_subcommand("stats", "entries, bytes and counters of a local store");
  std::string stats_mount;
  auto* stats_dir = stats->add_option("--dir", store_dir, "store directory");
  stats->add_option("--mount", stats_mount, "a running `hlocache mount`'s mount point")
      ->excludes(stats_dir);
  CLI::App* verify = app.add_subcommand(
      "verify", "verify every entry of a local store; quarantine corrupt ones (exit 1 if any)");
  verify->add_option("--dir", store_dir, "store directory")->required();
  CLI::App* gc = app.add_subcommand(
      "gc", "evict least-recently-used entries of a local store or a bucket to a size");
  BucketGcSettings bucket_gc;
  auto* gc_dir = gc->add_option("--dir", store_dir, "store directory");
  gc->add_option("--cache", bucket_gc.bucket, "a bucket, s3://BUCKET[/PREFIX], instead of --dir")
      ->excludes(gc_dir);
  gc->add_option("--max-size", max_size, "size to shrink to: bytes, or with K, M, G, T")
      ->required();
  gc->add_option("--keep-used-within", bucket_gc.keep_used_within_seconds,
                 "bucket: never evict what was used this many seconds ago or later (servers "
                 "mark a use at most hourly: the default keeps anything served in the last hour)")
      ->capture_default_str();
  gc->add_flag("--dry-run", bucket_gc.dry_run,
               "bucket: print what would be evicted, evict nothing");

  CompileSettings compile_settings;
  RunSettings run_settings;
  WorkerSettings worker_settings;
  auto add_compile_flags = [&](CLI::App* cmd) {
    cmd->add_option("--target", compile_settings.target,
                    "cpu-x86-64-v2|v3|v4 (default: this host's best level)");
    cmd->add_option("--cxx", compile_settings.cxx, "the C++ compiler to build with")
        ->capture_default_str();
    cmd->add_option("--timeout", compile_settings.timeout_seconds,
                    "seconds before the compile is killed")
        ->capture_default_str();
    cmd->add_option("--cache", compile_settings.cache,
                    "look up and share through a cache: DIR, http(s)://URL, or a comma-separated "
                    "list of them (default $HLOCACHE)");
  };
  CLI::App* compile =
      app.add_subcommand("compile", "compile an HLO module into an executable artifact");
  add_compile_flags(compile);
  compile->add_option("file", file_a, "HLO text file ('-' = stdin)")->required();
  compile->add_option("-o,--output", compile_settings.output,
                      "where to write the artifact (default: KEY.hloart)");

  CLI::App* run = app.add_subcommand(
      "run", "compile an HLO module, run it on generated inputs, and print its results' checksums");
  add_compile_flags(run);
  run->add_option("file", file_a, "HLO text file ('-' = stdin)")->required();
  run->add_option("--inputs", run_settings.inputs, "random or zeros")->capture_default_str();
  run->add_option("--seed", run_settings.seed, "seed for random inputs")->capture_default_str();
  run->add_flag("--check", run_settings.check,
                "compare with the reference interpreter (exit 1 on a mismatch)");
  run->add_option("--artifact", run_settings.artifact, "run this artifact instead of compiling");

  PrewarmSettings prewarm_settings;
  std::vector<std::string> prewarm_paths;
  CLI::App* prewarm = app.add_subcommand(
      "prewarm", "compile every .hlo under the paths into a cache (for CI), with a final table");
  prewarm->add_option("paths", prewarm_paths, "files or folders of .hlo files")->required();
  prewarm->add_option("--cache", prewarm_settings.cache, "the cache spec to fill")->required();
  prewarm->add_option("-j,--jobs", prewarm_settings.jobs, "modules at once")->capture_default_str();
  prewarm->add_option("--target", prewarm_settings.target,
                      "cpu-x86-64-v2|v3|v4 (default: this host's best level)");
  prewarm->add_option("--cxx", prewarm_settings.cxx, "the C++ compiler")->capture_default_str();

  std::string bundle_path, cache_spec;
  CLI::App* export_cmd =
      app.add_subcommand("export", "write every entry of a local store into one bundle file");
  export_cmd->add_option("--cache", cache_spec, "store directory")->required();
  export_cmd->add_option("-o,--output", bundle_path, "the bundle to write")->required();
  CLI::App* import_cmd = app.add_subcommand(
      "import", "check every entry of a bundle and store it in a cache (exit 1 if any is bad)");
  import_cmd->add_option("bundle", bundle_path, "a bundle from `hlocache export`")->required();
  import_cmd->add_option("--cache", cache_spec, "the cache spec to fill")->required();

  CLI::App* worker = app.add_subcommand("compile-worker", "");  // Internal: the pool's child.
  worker->group("");
  worker->add_option("--input", worker_settings.input)->required();
  worker->add_option("--output", worker_settings.output)->required();
  worker->add_option("--key", worker_settings.key)->required();
  worker->add_option("--name", worker_settings.name);
  worker->add_option("--target", worker_settings.target);
  worker->add_option("--temp-root", worker_settings.temp_root);
  worker->add_option("--cxx", worker_settings.cxx);
  worker->add_option("--memory-limit", worker_settings.memory_limit_bytes);

  hlocache::mount::MountSettings mount_settings;
  CLI::App* mount = app.add_subcommand(
      "mount", "a directory that is the fleet's cache, for frameworks' own cache directories");
  mount->add_option("mountpoint", mount_settings.mountpoint, "where to mount")->required();
  mount->add_option("--cache", mount_settings.spec,
                    "tiers: a local store directory, a server URL and a bucket (s3://...) "
                    "(default: $HLOCACHE)");
  mount->add_flag("--readonly", mount_settings.read_only,
                  "serve reads only; every change is EROFS");
  mount
      ->add_option("--namespace", mount_settings.file_namespace,
                   "keeps these names apart from other mounts' on the same tiers")
      ->capture_default_str();
  mount->add_option("--state", mount_settings.state_dir,
                    "host-local names and files being written (default: beside the store)");
  mount->add_option("--local", mount_settings.local_patterns,
                    "also keep names matching this pattern on this host (fnmatch, per "
                    "component; defaults: *.lock *.lockfile *-atime *.tmp tmp.pid_*)");
  mount->add_option("--max-size", mount_settings.max_size,
                    "local store cap (bytes, or with K, M, G, T); least recently used go first");
  mount->add_flag("--debug", mount_settings.debug, "log every FUSE request on stderr");
  mount->add_flag("--dry-run", mount_settings.dry_run,
                  "check the options, print what would be mounted, and exit");

  hlocache::server::ServeSettings serve_settings;
  hlocache::server::ServerOptions& so = serve_settings.options;
  std::string tokens_file, tls_cert, tls_key, worker_binary;
  size_t compile_timeout_seconds = 600, io_timeout_seconds = 10;
  CLI::App* serve = app.add_subcommand(
      "serve", "run the artifact server on a store directory (stops cleanly on SIGTERM)");
  serve->add_option("--dir", so.dir, "store directory")->capture_default_str();
  serve->add_option("--listen", serve_settings.listen, "HOST:PORT or [IPV6]:PORT (port 0: any)")
      ->capture_default_str();
  serve->add_flag("--readonly", so.read_only, "refuse every write, whatever the token");
  serve->add_option("--max-size", serve_settings.max_size,
                    "store size cap (bytes, or with K, M, G, T); least recently used go first");
  serve->add_option("--tokens", tokens_file, "file of 'ROLE TOKEN' lines (read, write, admin)");
  serve->add_flag("--insecure-open", so.insecure_open,
                  "listen beyond loopback without --tokens (anyone may write and delete)");
  serve->add_option("--tls-cert", tls_cert, "PEM certificate: serve HTTPS");
  serve->add_option("--tls-key", tls_key, "PEM private key of --tls-cert");
  serve->add_option("--compile-workers", so.compile_workers, "compiles run at once")
      ->capture_default_str();
  serve
      ->add_option("--compile-queue", so.compile_queue,
                   "compiles that may wait for a worker before 503")
      ->capture_default_str();
  serve
      ->add_option("--compile-timeout", compile_timeout_seconds,
                   "seconds before a compile is killed")
      ->capture_default_str();
  serve->add_option("--max-body", serve_settings.max_body,
                    "largest upload or HLO text accepted (default 4G)");
  serve->add_option("--memory-tier", serve_settings.memory_tier,
                    "memory for recently served bodies of 64 KiB and more (default 256M; 0: off)");
  serve->add_flag("--zero-copy", so.zero_copy,
                  "send the memory tier's bodies from its pages (splice) rather than copying them");
  serve
      ->add_option("--threads", so.threads,
                   "requests served at once (idle keep-alive connections hold none)")
      ->capture_default_str();
  serve
      ->add_option("--io-timeout", io_timeout_seconds,
                   "seconds a client may stall while sending or receiving")
      ->capture_default_str();
  serve->add_flag("--verify-uploads", so.verify_uploads,
                  "also check each upload's target, compiler id and payload kind");
  serve->add_option("--access-log", so.access_log, "'-' (stderr), a file, or '' for none")
      ->capture_default_str();
  serve->add_flag("--access-log-json", so.access_log_json, "access log lines as JSON");
  serve->add_option("--cxx", so.cxx, "the C++ compiler the compile workers use")
      ->capture_default_str();
  serve->add_option("--upstream", so.upstream_url,
                    "origin server (http(s)://HOST:PORT) to read through to, forward compiles "
                    "and uploads to; or a bucket (s3://BUCKET[/PREFIX]) to read through to and "
                    "upload to; or several origins and one bucket, comma-separated (each key's "
                    "compiles go to one origin, by rendezvous hashing)");
  serve->add_option("--upstream-token", so.upstream_token,
                    "bearer token for the origin (default: $HLOCACHE_UPSTREAM_TOKEN)");
  serve->add_option("--upstream-ca-cert", so.upstream_ca_cert,
                    "PEM file of the CA that signs an https origin");
  serve->add_flag("--dry-run", serve_settings.dry_run,
                  "check the options, print what would be served, and exit");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  // Where every s3:// backend of this process looks first (storage/s3_backend.h).
  if (!s3_endpoint.empty()) ::setenv("AWS_ENDPOINT_URL_S3", s3_endpoint.c_str(), 1);

  if (auto status = hlocache::cli::RunKeyCommand(key_commands)) return *status;
  if (*health) return RunHealth(health_url, health_ca_cert, std::cout, std::cerr);
  if (*stats) {
    if (!stats_mount.empty())
      return hlocache::mount::RunMountStats(stats_mount, std::cout, std::cerr);
    if (store_dir.empty()) {
      std::cerr << "hlocache stats: give --dir DIR or --mount MOUNTPOINT\n";
      return 2;
    }
    return RunStats(store_dir, std::cout, std::cerr);
  }
  if (*mount) return hlocache::mount::RunMount(mount_settings, std::cout, std::cerr);
  if (*verify) return RunVerify(store_dir, std::cout, std::cerr);
  if (*gc) {
    if (!bucket_gc.bucket.empty()) {
      bucket_gc.max_size = max_size;
      return RunBucketGc(bucket_gc, std::cout, std::cerr);
    }
    if (store_dir.empty()) {
      std::cerr << "hlocache gc: give --dir DIR or --cache s3://BUCKET[/PREFIX]\n";
      return 1;
    }
    return RunGc(store_dir, max_size, std::cout, std::cerr);
  }
  if (compile_settings.cache.empty()) {
    if (const char* env = std::getenv("HLOCACHE")) compile_settings.cache = env;
  }
  if (*compile) return RunCompile(file_a, compile_settings, std::cout, std::cerr);
  if (*run) return RunRun(file_a, compile_settings, run_settings, std::cout, std::cerr);
  if (*prewarm) {
    prewarm_settings.worker_binary = hlocache::CurrentExecutable().string();
    return RunPrewarm(prewarm_paths, prewarm_settings, std::cout, std::cerr);
  }
  if (*export_cmd) return RunExport(cache_spec, bundle_path, std::cout, std::cerr);
  if (*import_cmd) return RunImport(bundle_path, cache_spec, std::cout, std::cerr);
  if (*worker) return RunCompileWorker(worker_settings, std::cerr);
  if (*serve) {
    so.tokens_file = tokens_file;
    so.tls_cert = tls_cert;
    so.tls_key = tls_key;
    so.compile_timeout = std::chrono::seconds(compile_timeout_seconds);
    so.io_timeout = std::chrono::seconds(std::max<size_t>(io_timeout_seconds, 1));
    if (so.upstream_token.empty()) {
      if (const char* env = std::getenv("HLOCACHE_UPSTREAM_TOKEN")) so.upstream_token = env;
    }
    return hlocache::server::RunServe(std::move(serve_settings), std::cout, std::cerr);
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Executables' large convolutions run on oneDNN's OpenMP threads
  // (compiler/artifact/conv_runtime.h), which by default spin after each one, on the cores the
  // executable's own next loops want: a while of 20 convolutions each followed by elementwise
  // work, on 2 cores, ran 250 to 343 ms that way (median 283 ms of 8 runs) and 246 to 281 ms
  // with them sleeping at once (median 251 ms of 12), the convolutions alone as fast either way.
  // libgomp reads this when oneDNN loads it, later; here no other thread exists yet to race the
  // change. A value the user set stays.
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "hlocache: internal error: " << e.what() << "\n";
    return 1;
  }
}
