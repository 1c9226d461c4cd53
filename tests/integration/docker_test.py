#!/usr/bin/python3
"""docker/Dockerfile and docker/compose.yaml, checked without a Docker engine.

- The Dockerfile: multi-stage on Debian bookworm, a non-root user, a volume for the store, a
  health check, hlocache as the entry point; its build stage installs every library the
  Makefile builds with and copies every source the build needs (a cmake configure of exactly
  what it copies succeeds); its runtime stage installs the Debian package of every shared
  library the built programs load.
- Every command the image and the compose file run is a valid invocation: `serve` commands
  pass `--dry-run` (every option parsed and checked), and the others (health check, prewarm,
  trainers) run for real against local stand-ins for the compose services, with the service
  URLs and the volume paths mapped to this machine.

Usage: docker_test.py REPO_ROOT BUILD_DIR. Needs python3-yaml (Debian).
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

FAILURES = []


def expect(condition, message):
    print(("ok: " if condition else "FAIL: ") + message)
    if not condition:
        FAILURES.append(message)


# --- the Dockerfile ------------------------------------------------------------------------
def parse_dockerfile(path):
    """[(stage_index, INSTRUCTION, arguments)], continuation lines joined, comments dropped."""
    instructions, current, stage = [], "", -1
    for raw in open(path):
        line = raw.rstrip("\n")
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        word, _, rest = current.strip().partition(" ")
        word = word.upper()
        if word == "FROM":
            stage += 1
        instructions.append((stage, word, rest.strip()))
        current = ""
    return instructions


def exec_form(arguments):
    """The argv of an exec-form instruction: CMD ["a", "b"]."""
    return json.loads(arguments)


def apt_packages(run_arguments):
    match = re.search(r"apt-get install (.*?)(&&|$)", run_arguments)
    if not match:
        return set()
    return {w for w in match.group(1).split() if not w.startswith("-")}


def makefile_packages(repo):
    text = open(os.path.join(repo, "Makefile")).read()
    match = re.search(r"^APT_PACKAGES := (.*?)(?<!\\)\n", text, re.S | re.M)
    return set(match.group(1).replace("\\\n", " ").split())


def needed_libraries(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.*?)\]", out)


def package_of_library(soname):
    # The library as the dynamic loader would find it, then the package that owns that file.
    cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    match = re.search(r"^\s*" + re.escape(soname) + r" \(.*?\) => (\S+)", cache, re.M)
    if not match:
        return None
    path = os.path.realpath(match.group(1))
    for candidate in (path, match.group(1), "/usr" + path if not path.startswith("/usr") else path):
        r = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0]
    return None


def check_dockerfile(repo, build, instructions):
    stages = [args for _, word, args in instructions if word == "FROM"]
    expect(len(stages) >= 2, f"multi-stage ({len(stages)} stages)")
    expect(all(re.match(r"debian:bookworm(-slim)?( |$)", s) for s in stages),
           f"every stage is Debian bookworm: {stages}")
    final = len(stages) - 1
    last = {word: args for stage, word, args in instructions if stage == final}
    user = last.get("USER", "root")
    expect(user not in ("root", "0"), f"the image runs as a non-root user ({user})")
    volume = last.get("VOLUME", "")
    expect(bool(volume), f"a volume for the store ({volume})")
    expect(exec_form(last["ENTRYPOINT"]) == ["hlocache"], "hlocache is the entry point")
    health = last.get("HEALTHCHECK", "")
    expect("CMD" in health, "a health check")
    cmd = exec_form(last["CMD"])
    expect(cmd[0] == "serve" and volume in cmd, "the default command serves the volume")

    # Build stage: the Makefile's libraries, and a tree of exactly what it copies configures.
    build_runs = [args for stage, word, args in instructions if stage == 0 and word == "RUN"]
    build_apt = set().union(*(apt_packages(r) for r in build_runs))
    libraries = {p for p in makefile_packages(repo)
                 if p.endswith("-dev") and p not in ("libgtest-dev", "libgmock-dev")
                 and not p.startswith("libclang")}
    expect(libraries <= build_apt,
           f"the build stage installs every library the Makefile builds with "
           f"(missing: {sorted(libraries - build_apt)})")
    tree = tempfile.mkdtemp(prefix="hlocache-docker-context-")
    try:
        for stage, word, args in instructions:
            if stage != 0 or word != "COPY":
                continue
            source, dest = args.split()
            # WORKDIR is the tree's root; "./" and "dir/" are folders, anything else a name.
            into_folder = dest in (".", "./") or dest.endswith("/")
            dest_path = os.path.join(tree, "" if dest in (".", "./") else dest)
            path = os.path.join(repo, source)
            if os.path.isdir(path):
                shutil.copytree(path, dest_path, dirs_exist_ok=True)
            else:
                if into_folder:
                    dest_path = os.path.join(dest_path, os.path.basename(source))
                os.makedirs(os.path.dirname(dest_path), exist_ok=True)
                shutil.copy(path, dest_path)
        configure = next(r for r in build_runs if "cmake -S" in r)
        flags = [w for w in shlex.split(configure.split("&&")[0]) if w.startswith("-D")]
        r = subprocess.run(["cmake", "-S", tree, "-B", os.path.join(tree, "_build"), "-G", "Ninja",
                            *flags], capture_output=True, text=True)
        expect(r.returncode == 0, "cmake configures the sources the build stage copies "
               + ("" if r.returncode == 0 else r.stderr[-2000:]))
    finally:
        shutil.rmtree(tree, ignore_errors=True)

    # Runtime stage: a package for every shared library the installed programs load.
    runtime_apt = set().union(*(apt_packages(args) for stage, word, args in instructions
                                if stage == final and word == "RUN"))
    expect("g++" in runtime_apt, "the runtime image has the C++ compiler the server compiles with")
    ours = {"libhlocache.so"}
    base = {"libc6", "libstdc++6", "libgcc-s1"}  # In every Debian image.
    for program in ("hlocache", "hlocache-train-step"):
        for soname in needed_libraries(os.path.join(build, program)):
            if soname in ours:
                continue
            package = package_of_library(soname)
            expect(package is not None and (package in base or package in runtime_apt),
                   f"{program} loads {soname}: its package ({package}) is installed")
    copied = [args for stage, word, args in instructions if stage == final and word == "COPY"]
    for args in copied:
        source = args.split()[-2]
        if not source.startswith("/"):
            expect(os.path.exists(os.path.join(repo, source)), f"COPY {source} exists")
    return exec_form(last["ENTRYPOINT"]), cmd, health


# --- running the commands ------------------------------------------------------------------
class StandIns:
    """Local servers standing in for the compose services that serve."""

    def __init__(self, build, work):
        self.build, self.work, self.procs, self.urls = build, work, [], {}

    def start(self, name, args):
        store = os.path.join(self.work, name)
        log = open(os.path.join(self.work, name + ".log"), "w")
        proc = subprocess.Popen([os.path.join(self.build, "hlocache"), "serve", "--dir", store,
                                 "--listen", "127.0.0.1:0", "--access-log", "", *args],
                                stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                info = json.load(open(os.path.join(store, "server.json")))
                if info.get("pid") == proc.pid:
                    self.urls[name] = info["listen"]
                    return self.urls[name]
            except (OSError, ValueError):
                pass
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"stand-in {name} did not start: " +
                           open(os.path.join(self.work, name + ".log")).read())

    def stats(self, name):
        with urllib.request.urlopen(self.urls[name] + "/v1/stats", timeout=10) as r:
            return json.load(r)

    def stop(self):
        for proc in self.procs:
            proc.terminate()
            proc.wait(timeout=60)


def environment(service):
    """The service's environment, with ${VAR...} references given a placeholder value."""
    env = dict(os.environ)
    for key, value in (service.get("environment") or {}).items():
        env[key] = re.sub(r"\$\{[^}]*\}", "placeholder-token", str(value))
    return env


def interpolate(text, values):
    """Compose's ${NAME}, ${NAME:-default} and ${NAME:?message} with `values`."""
    def one(m):
        name, op, rest = m.group(1), m.group(2) or "", m.group(3) or ""
        if name in values and values[name] != "":
            return values[name]
        if op == ":-":
            return rest
        raise KeyError(f"{name} is not set ({rest})")
    return re.sub(r"\$\{([A-Z0-9_]+)(:[-?])?([^}]*)\}", one, text)


def check_bucket_compose(docker, programs, entrypoint, default_cmd):
    """docker/compose.bucket.yaml: two origins on a bucket and host caches in front of both and
    the bucket; every serve command valid (dry run), the hosts naming every origin and the
    bucket the origins use, every service with the bucket's credentials from the environment."""
    values = {"HLOCACHE_BUCKET": "ml-compile-cache/team-a", "AWS_ACCESS_KEY_ID": "AKID",
              "AWS_SECRET_ACCESS_KEY": "secret", "HLOCACHE_READ_TOKEN": "r" * 32,
              "HLOCACHE_WRITE_TOKEN": "w" * 32}
    compose = yaml.safe_load(interpolate(open(os.path.join(docker, "compose.bucket.yaml")).read(),
                                         values))
    services = compose["services"]
    origins = sorted(n for n in services if n.startswith("origin"))
    caches = sorted(n for n in services if n.startswith("cache-"))
    expect(len(origins) >= 2 and len(caches) >= 2,
           f"compose.bucket has two origins and per-host caches: {sorted(services)}")

    def argv_of(service):
        return list(service.get("entrypoint") or entrypoint) + list(service.get("command") or default_cmd)

    bucket = "s3://" + values["HLOCACHE_BUCKET"]
    for name in origins + caches:
        argv = argv_of(services[name])
        upstream = argv[argv.index("--upstream") + 1] if "--upstream" in argv else ""
        r = subprocess.run([programs[argv[0]], *argv[1:], "--dry-run"], capture_output=True,
                           text=True)
        expect(r.returncode == 0, f"compose.bucket {name}: `{shlex.join(argv)}` is a valid serve "
               f"command ({(r.stdout + r.stderr).strip()})")
        parts = upstream.split(",")
        if name in origins:
            expect(parts == [bucket], f"compose.bucket {name} compiles into the bucket ({upstream})")
        else:
            expect(sorted(parts) == sorted([f"http://{o}:7070" for o in origins] + [bucket]),
                   f"compose.bucket {name} names every origin and the bucket ({upstream})")
        env = services[name].get("environment") or {}
        expect(env.get("AWS_ACCESS_KEY_ID") == "AKID" and env.get("AWS_SECRET_ACCESS_KEY") == "secret",
               f"compose.bucket {name} has the bucket's credentials from the environment")


def main():
    repo, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    docker = os.path.join(repo, "docker")
    instructions = parse_dockerfile(os.path.join(docker, "Dockerfile"))
    entrypoint, default_cmd, health = check_dockerfile(repo, build, instructions)
    compose = yaml.safe_load(open(os.path.join(docker, "compose.yaml")))
    services = compose["services"]
    expect({"origin", "prewarm"} <= set(services) and
           any(n.startswith("cache-") for n in services) and
           any(n.startswith("trainer") for n in services),
           f"compose has an origin, per-host caches, a prewarm job and trainers: {sorted(services)}")
    for name, service in services.items():
        expect(service.get("build", {}).get("dockerfile") == "docker/Dockerfile" and
               service.get("image") == "hlocache:latest", f"{name} runs the image of docker/Dockerfile")
    programs = {"hlocache": os.path.join(build, "hlocache"),
                "hlocache-train-step": os.path.join(build, "hlocache-train-step")}

    def argv_of(service):
        return list(service.get("entrypoint") or entrypoint) + list(service.get("command") or default_cmd)

    work = tempfile.mkdtemp(prefix="hlocache-docker-test-")
    stand_ins = StandIns(build, work)
    try:
        # Every serve command, the image's default included: all options parsed and checked.
        serving = [("Dockerfile CMD", entrypoint + default_cmd)] + [
            (name, argv_of(s)) for name, s in services.items() if argv_of(s)[1:2] == ["serve"]]
        for name, argv in serving:
            r = subprocess.run([programs[argv[0]], *argv[1:], "--dry-run"], capture_output=True,
                               text=True)
            expect(r.returncode == 0, f"{name}: `{shlex.join(argv)}` is a valid serve command "
                   f"({(r.stdout + r.stderr).strip()})")

        # Every mount command: its options parsed and checked.
        for name, s in services.items():
            argv = argv_of(s)
            if argv[1:2] != ["mount"]:
                continue
            r = subprocess.run([programs[argv[0]], *argv[1:], "--dry-run"], capture_output=True,
                               text=True, env=environment(s))
            expect(r.returncode == 0, f"{name}: `{shlex.join(argv)}` is a valid mount command "
                   f"({(r.stdout + r.stderr).strip()})")
            expect("/dev/fuse" in (s.get("devices") or []) and
                   "SYS_ADMIN" in (s.get("cap_add") or []),
                   f"{name} has /dev/fuse and the capability to mount")

        # Stand-ins for the serving services: the origin, and caches reading through to it.
        origin_url = stand_ins.start("origin", [])
        for name, argv in serving:
            if name.startswith("cache-"):
                stand_ins.start(name, ["--upstream", origin_url])

        def localize(argv, service):
            mounts = {}
            for volume in service.get("volumes") or []:
                if not isinstance(volume, str):
                    continue  # A long-form bind: no local stand-in needed.
                parts = volume.split(":")
                if parts[0].startswith("."):
                    mounts[parts[1]] = os.path.normpath(os.path.join(docker, parts[0]))
            out = []
            for arg in argv:
                for name, url in stand_ins.urls.items():
                    arg = arg.replace(f"http://{name}:7070", url)
                for inside, outside in mounts.items():
                    if arg == inside or arg.startswith(inside + "/"):
                        arg = outside + arg[len(inside):]
                out.append(arg)
            return out

        # The health check, against a live server and against nothing.
        health_argv = exec_form(health[health.index("CMD") + 3:].strip())
        live = [a.replace("http://127.0.0.1:7070", origin_url) for a in health_argv]
        r = subprocess.run([programs[live[0]], *live[1:]], capture_output=True, text=True)
        expect(r.returncode == 0, f"the health check passes on a live server ({r.stdout.strip()})")
        dead = [a.replace("http://127.0.0.1:7070", "http://127.0.0.1:9") for a in health_argv]
        r = subprocess.run([programs[dead[0]], *dead[1:]], capture_output=True, text=True)
        expect(r.returncode == 1, f"the health check fails without one ({r.stderr.strip()})")

        # The jobs, in the order their depends_on gives: prewarm, then the trainers.
        jobs = [n for n in services if n == "prewarm"] + [n for n in services if n.startswith("trainer")]
        for name in jobs:
            argv = localize(argv_of(services[name]), services[name])
            r = subprocess.run([programs[argv[0]], *argv[1:]], capture_output=True, text=True,
                               env=environment(services[name]), timeout=600)
            expect(r.returncode == 0, f"{name}: `{shlex.join(argv)}` runs "
                   f"({(r.stdout + r.stderr).strip()[-600:]})")
        models = [f for f in os.listdir(os.path.join(docker, "models")) if f.endswith(".hlo")]
        origin = stand_ins.stats("origin")
        expect(origin["compiles"] == len(models),
               f"prewarm compiled each model once on the origin ({origin['compiles']} of {len(models)})")
        for name in stand_ins.urls:
            if name.startswith("cache-"):
                stats = stand_ins.stats(name)
                expect(stats["compiles"] == 0, f"{name} served its trainer without compiling")
        check_bucket_compose(docker, programs, entrypoint, default_cmd)
    finally:
        stand_ins.stop()
        shutil.rmtree(work, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("docker: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
