#!/usr/bin/env python3
"""`hlocache mount` on real FUSE mounts: the cache directories of PyTorch/XLA, JAX, Triton and
Inductor, used as those frameworks use them, on a mount that is the fleet's cache.

Each scenario starts its own servers and mounts in a fresh directory. The two-host scenario puts
an origin and two per-host servers in network namespaces (as multi_host_test.py does); the
mounts join a host's network with nsenter, so they stay visible to this process.

Usage: mount_test.py HLOCACHE_BINARY XLA_CACHE_PATTERN [SCENARIO...]. Exit 0 on success, 1 on a
failure, 77 (skipped) only where /dev/fuse is missing.
"""
import errno
import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SKIP = 77
MiB = 1 << 20


def expect(condition, message):
    if not condition:
        raise AssertionError(message)
    print("ok:", message, flush=True)


def content(seed, size):
    """Deterministic bytes: what a writer of `seed` writes."""
    rng = random.Random(seed)
    return rng.randbytes(size)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def wait_until(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def is_mounted(mountpoint):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == os.path.realpath(mountpoint) and " - fuse.hlocache " in line:
                return True
    return False


class Server:
    """`hlocache serve` on a directory; `launcher` runs it in a network namespace."""

    def __init__(self, binary, directory, args=(), launcher=(), listen="127.0.0.1:0"):
        self.dir = directory
        self.launcher = list(launcher)
        os.makedirs(directory, exist_ok=True)
        self.log_path = directory + ".log"
        self.proc = subprocess.Popen(
            [*launcher, binary, "serve", "--dir", directory, "--listen", listen,
             "--access-log", "", *args],
            stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)
        info = os.path.join(directory, "server.json")
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.log()}")
            try:
                data = json.load(open(info))
                if data.get("pid") is not None and data.get("listen"):
                    self.url = data["listen"]
                    break
            except (OSError, ValueError):
                pass
            if time.time() > deadline:
                raise AssertionError(f"server did not start: {self.log()}")
            time.sleep(0.05)

    def log(self):
        return open(self.log_path).read()

    def get(self, path):
        """The body of a GET, asked from the server's network namespace."""
        if not self.launcher:
            with urllib.request.urlopen(self.url + path, timeout=10) as r:
                return r.read().decode()
        fetch = ("import sys, urllib.request; "
                 "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode(), end='')")
        r = subprocess.run([*self.launcher, sys.executable, "-c", fetch, self.url + path],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise AssertionError(f"GET {path}: {r.stderr}")
        return r.stdout

    def stats(self):
        return json.loads(self.get("/v1/stats"))

    def files(self, namespace, prefix=""):
        body = self.get(f"/v1/files/{namespace}?prefix={prefix}")
        return [json.loads(line) for line in body.splitlines() if line]

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)


class Mount:
    """`hlocache mount` in the foreground; `net` names a network namespace to join."""

    def __init__(self, binary, mountpoint, cache, state, args=(), net=None, namespace=None):
        self.mountpoint = mountpoint
        os.makedirs(mountpoint, exist_ok=True)
        self.log_path = state.rstrip("/") + ".mount.log"
        launcher = ["nsenter", f"--net=/run/netns/{net}"] if net else []
        command = [*launcher, binary, "mount", mountpoint, "--cache", cache, "--state", state,
                   *args]
        if namespace:
            command += ["--namespace", namespace]
        self.proc = subprocess.Popen(command, stdout=open(self.log_path, "w"),
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not is_mounted(mountpoint):
            if self.proc.poll() is not None:
                raise AssertionError(f"mount exited {self.proc.returncode}: {self.log()}")
            if time.time() > deadline:
                raise AssertionError(f"not mounted: {self.log()}")
            time.sleep(0.02)

    def log(self):
        return open(self.log_path).read()

    def path(self, *parts):
        return os.path.join(self.mountpoint, *parts)

    def stats(self):
        return json.loads(os.getxattr(self.mountpoint, "user.hlocache.stats"))

    def stop(self):
        """SIGTERM: unmounts, exit 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            code = self.proc.wait(timeout=60)
            expect(code == 0, f"the mount exits 0 on SIGTERM ({code}): {self.log()[-500:]}")
        expect(not is_mounted(self.mountpoint), "and is unmounted")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        subprocess.run(["fusermount3", "-u", "-z", self.mountpoint], capture_output=True)

    def wait_uploaded(self, timeout=60):
        wait_until(lambda: self.stats().get("pending_uploads", 0) == 0, timeout, "uploads")


def errno_of(call):
    try:
        call()
    except OSError as e:
        return e.errno
    return 0


class Scenarios:
    def __init__(self, binary, xla_tool, work):
        self.binary = binary
        self.xla = xla_tool
        self.work = work
        self.cleanup = []

    def dir(self, name):
        path = os.path.join(self.work, name)
        os.makedirs(path, exist_ok=True)
        return path

    def server(self, name, args=(), **kwargs):
        s = Server(self.binary, os.path.join(self.work, name), args, **kwargs)
        self.cleanup.append(lambda: s.stop(signal.SIGKILL))
        return s

    def mount(self, name, cache, args=(), **kwargs):
        m = Mount(self.binary, self.dir(name), cache, os.path.join(self.work, name + "-state"),
                  args, **kwargs)
        self.cleanup.append(m.kill)
        return m

    def finish(self):
        for step in reversed(self.cleanup):
            try:
                step()
            except Exception as e:  # Cleanup must go on.
                print("cleanup:", e)
        self.cleanup = []

    # ---------------------------------------------------------------------------------------
    def round_trip(self):
        """Files written through one mount read back through another, from the server."""
        server = self.server("origin")
        a = self.mount("a", server.url)
        files = {"empty": b"", "one": b"x", "small": content(1, 4096),
                 "nested/dir/chunked": content(2, 5 * MiB + 3), "big": content(3, 64 * MiB)}
        for name, data in files.items():
            os.makedirs(os.path.dirname(a.path(name)), exist_ok=True)
            with open(a.path(name), "wb") as f:
                f.write(data)
        for name, data in files.items():
            expect(os.stat(a.path(name)).st_size == len(data), f"{name}: stat size on the writer")
            expect(open(a.path(name), "rb").read() == data, f"{name}: reads back on the writer")
        expect(sorted(os.listdir(a.mountpoint)) == ["big", "empty", "nested", "one", "small"],
               "the root lists the files and the implicit directory")
        a.wait_uploaded()
        listed = {e["path"]: e["size"] for e in server.files("files")}
        expect(listed == {n: len(d) for n, d in files.items()},
               f"the server lists every file with its size: {listed}")
        b = self.mount("b", server.url)
        expect(sorted(os.listdir(b.path("nested", "dir"))) == ["chunked"],
               "a second mount lists a nested directory from the server")
        for name, data in files.items():
            expect(open(b.path(name), "rb").read() == data, f"{name}: the second mount reads it")
        st = b.stats()
        expect(st["fetches"] == len(files), f"each fetched once from the server: {st}")
        cli = subprocess.run([self.binary, "stats", "--mount", b.mountpoint], capture_output=True,
                             text=True)
        expect(cli.returncode == 0 and json.loads(cli.stdout)["hits"] == len(files),
               f"hlocache stats --mount prints the mount's counters: {cli.stdout.strip()}")
        expect(server.stats()["files"]["files"]["writes"] == len(files),
               f"the server counts the writes under the namespace: {server.stats().get('files')}")
        a.stop()
        b.stop()

    def partial_never_visible(self):
        """A slow 64 MiB write is invisible, to readers here and on another mount, until it
        is closed; then it is whole."""
        server = self.server("origin")
        a = self.mount("a", server.url)
        b = self.mount("b", server.url)
        writer = subprocess.Popen([self.xla, "put", a.mountpoint, "slow", str(64 * MiB), "7",
                                   "20"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        seen = []
        while writer.poll() is None:
            for m in (a, b):
                r = subprocess.run([self.xla, "get", m.mountpoint, "slow"],
                                   capture_output=True, text=True)
                seen.append(r.stdout.strip())
            time.sleep(0.05)
        expect(writer.returncode == 0, "the slow writer finished")
        whole = f"hit {64 * MiB} 7"
        misses = sum(s == "miss" for s in seen)
        # A read after the close and before the writer's exit may see the whole file.
        expect(misses > 10 and all(s in ("miss", whole) for s in seen),
               f"{len(seen)} reads while it was written: {misses} misses, the rest whole, "
               f"never a partial file ({set(seen) - {'miss', whole}})")
        r = subprocess.run([self.xla, "get", a.mountpoint, "slow"], capture_output=True, text=True)
        expect(r.stdout.strip() == f"hit {64 * MiB} 7", f"whole once closed: {r.stdout}")
        a.wait_uploaded()
        wait_until(lambda: subprocess.run([self.xla, "get", b.mountpoint, "slow"],
                                          capture_output=True, text=True).returncode == 0,
                   5, "the other mount to see it")
        print("ok: the other mount sees it whole within the negative-lookup time")
        a.stop()
        b.stop()

    def pytorch_xla_two_hosts(self):
        """PyTorch/XLA's PersistentCache on two hosts: one writer, one read-only worker, each
        behind its host's server in front of one origin, in network namespaces."""
        net = Network()
        self.cleanup.append(net.teardown)
        net.build(["origin", "a", "b"])
        origin = self.server("origin", launcher=net.launcher("origin"),
                             listen=f"{net.address('origin')}:7070",
                             args=["--insecure-open"])
        host = {}
        for h in ("a", "b"):
            host[h] = self.server(f"host-{h}", launcher=net.launcher(h),
                                  args=["--upstream", origin.url])
        a = self.mount("xla-a", host["a"].url, net=net.name("a"))
        b = self.mount("xla-b", host["b"].url, args=["--readonly"], net=net.name("b"))
        put = subprocess.run([self.xla, "put", a.mountpoint, "graph1", str(3 * MiB), "11"],
                             capture_output=True, text=True)
        expect(put.returncode == 0, f"host A writes graph1.bin: {put.stderr}")
        a.wait_uploaded()
        wait_until(lambda: subprocess.run([self.xla, "get", b.mountpoint, "graph1"],
                                          capture_output=True).returncode == 0, 10,
                   "host B to read graph1")
        r = subprocess.run([self.xla, "get", b.mountpoint, "graph1"], capture_output=True,
                           text=True)
        expect(r.stdout.strip() == f"hit {3 * MiB} 11", f"host B reads what A wrote: {r.stdout}")
        denied = subprocess.run([self.xla, "put", b.mountpoint, "graph2", "1000", "1"],
                                capture_output=True, text=True)
        expect(denied.returncode != 0 and "Read-only" in denied.stderr,
               f"the read-only worker cannot write: {denied.stderr.strip()}")
        # A slow 64 MiB write on A: B never sees part of it.
        writer = subprocess.Popen([self.xla, "put", a.mountpoint, "graph3", str(64 * MiB), "13",
                                   "15"])
        states = set()
        while writer.poll() is None:
            states.add(subprocess.run([self.xla, "get", b.mountpoint, "graph3"],
                                      capture_output=True, text=True).stdout.strip())
            time.sleep(0.1)
        expect("miss" in states and states <= {"miss", f"hit {64 * MiB} 13"},
               f"host B saw misses while A wrote, never a partial file: {states}")
        a.wait_uploaded()
        wait_until(lambda: subprocess.run([self.xla, "get", b.mountpoint, "graph3"],
                                          capture_output=True).returncode == 0, 10,
                   "host B to read graph3")
        print("ok: then host B reads it whole")
        # Host A removes its copy (as PersistentCache does with what it cannot deserialize):
        # host B still has it.
        os.remove(a.path("graph1.bin"))
        expect(not os.path.exists(a.path("graph1.bin")), "host A's view no longer has graph1")
        time.sleep(1.5)
        r = subprocess.run([self.xla, "get", b.mountpoint, "graph1"], capture_output=True,
                           text=True)
        expect(r.stdout.strip() == f"hit {3 * MiB} 11", "host B still reads graph1")
        expect(any(e["path"] == "graph1.bin" for e in origin.files("files")),
               "the origin still lists graph1")
        a.stop()
        b.stop()

    def jax_lru_cache(self):
        """JAX's LRUCache: <key>-cache files, <key>-atime files and a .lockfile held with
        fcntl, with and without a size cap."""
        server = self.server("origin")
        a = self.mount("jax", server.url)
        d = a.path("jax")
        os.makedirs(d)
        cache = JaxLruCache(d, max_size=-1)
        for i in range(6):
            cache.put(f"k{i}", content(100 + i, 100_000 + i))
        expect(all(cache.get(f"k{i}") == content(100 + i, 100_000 + i) for i in range(6)),
               "puts then gets without a cap")
        expect(cache.get("absent") is None, "a missing key is None")
        # The lock works across processes of this host.
        with open(os.path.join(d, ".lockfile"), "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            probe = subprocess.run([sys.executable, "-c",
                                    "import fcntl,sys; f=open(sys.argv[1],'a')\n"
                                    "try:\n fcntl.flock(f, fcntl.LOCK_EX|fcntl.LOCK_NB)\n"
                                    " print('got')\nexcept OSError:\n print('busy')",
                                    os.path.join(d, ".lockfile")], capture_output=True, text=True)
            expect(probe.stdout.strip() == "busy", "flock of .lockfile excludes another process")
            lockf = subprocess.run([sys.executable, "-c",
                                    "import fcntl,sys; f=open(sys.argv[1],'a')\n"
                                    "try:\n fcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB)\n"
                                    " print('got')\nexcept OSError:\n print('busy')",
                                    os.path.join(d, ".lockfile")], capture_output=True, text=True)
            expect(lockf.stdout.strip() == "got", "an fcntl lock is separate from flock, as on "
                   "any local file system")
        a.wait_uploaded()
        capped = JaxLruCache(d, max_size=350_000)
        for i in range(6, 10):
            capped.put(f"k{i}", content(100 + i, 100_000 + i))
        left = sorted(n for n in os.listdir(d) if n.endswith("-cache"))
        expect(sum(os.path.getsize(os.path.join(d, n)) for n in left) <= 350_000,
               f"with a cap, eviction keeps the directory under it: {left}")
        expect("k9-cache" in left, "the newest entry stays")
        a.wait_uploaded()
        shared = [e["path"] for e in server.files("files")]
        expect(not any(p.endswith("-atime") or p.endswith(".lockfile") for p in shared),
               f"-atime and .lockfile stay on this host: {shared}")
        expect(all(f"jax/k{i}-cache" in shared for i in range(6)),
               "files evicted here stay on the server (eviction removes them here only)")
        expect(all(f"jax/{n}" in shared for n in left), "what is left here reached the server")
        a.stop()

    def triton_and_inductor_renames(self):
        """Write-then-rename: only the final names reach the server."""
        server = self.server("origin")
        a = self.mount("tri", server.url)
        key_dir = a.path("triton", "abc123")
        tmp_dir = os.path.join(key_dir, f"tmp.pid_{os.getpid()}_0123abcd")
        os.makedirs(tmp_dir)
        for name, data in (("kernel.cubin", content(7, 200_000)), ("kernel.json", b'{"a": 1}')):
            with open(os.path.join(tmp_dir, name), "wb") as f:
                f.write(data)
            os.replace(os.path.join(tmp_dir, name), os.path.join(key_dir, name))
        os.removedirs(tmp_dir)  # Stops at the first directory that is not empty, as Triton's.
        expect(sorted(os.listdir(key_dir)) == ["kernel.cubin", "kernel.json"],
               "Triton's key directory holds the final names only")
        inductor = a.path("inductor", "fx")
        os.makedirs(inductor)
        tmp = os.path.join(inductor, f".{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "wb") as f:
            f.write(content(8, 50_000))
        os.rename(tmp, os.path.join(inductor, "graph.py"))
        expect(open(os.path.join(inductor, "graph.py"), "rb").read() == content(8, 50_000),
               "Inductor's renamed file reads back")
        a.wait_uploaded()
        shared = sorted(e["path"] for e in server.files("files"))
        expect(shared == ["inductor/fx/graph.py", "triton/abc123/kernel.cubin",
                          "triton/abc123/kernel.json"],
               f"the server holds the final names only: {shared}")
        expect(errno_of(lambda: os.rmdir(key_dir)) == errno.ENOTEMPTY,
               "rmdir of a directory with files is ENOTEMPTY")
        empty = a.path("triton", "empty")
        os.mkdir(empty)
        os.rmdir(empty)
        expect(not os.path.exists(empty), "rmdir of an empty directory works")
        a.stop()

    def writers_and_readers_at_once(self):
        """8 writers of one name end with one whole file; 8 readers of a 256 MiB file get
        identical bytes with one fetch from the server."""
        server = self.server("origin")
        a = self.mount("w", server.url)
        target = a.path("contended.bin")
        procs = [subprocess.Popen([sys.executable, "-c",
                                   "import random,sys\n"
                                   "data = random.Random(int(sys.argv[2])).randbytes(8 << 20)\n"
                                   "open(sys.argv[1], 'wb').write(data)",
                                   target, str(seed)]) for seed in range(8)]
        for p in procs:
            expect(p.wait(timeout=120) == 0, "a writer finished")
        got = open(target, "rb").read()
        writers = [seed for seed in range(8) if got == content(seed, 8 * MiB)]
        expect(len(writers) == 1, f"the file is exactly one writer's ({writers})")
        with open(a.path("big.bin"), "wb") as f:
            for i in range(256):
                f.write(content(1000 + i, MiB))
        expected = sha(b"".join(content(1000 + i, MiB) for i in range(256)))
        a.wait_uploaded()
        b = self.mount("r", server.url)
        gets_before = server.stats()["hits"]
        file_hits_before = server.stats()["files"]["files"]["hits"]
        readers = [subprocess.Popen([sys.executable, "-c",
                                     "import hashlib,sys\n"
                                     "h = hashlib.sha256()\n"
                                     "with open(sys.argv[1], 'rb') as f:\n"
                                     "  while chunk := f.read(1 << 20): h.update(chunk)\n"
                                     "print(h.hexdigest())", b.path("big.bin")],
                                    stdout=subprocess.PIPE, text=True) for _ in range(8)]
        digests = [r.communicate(timeout=300)[0].strip() for r in readers]
        expect(digests == [expected] * 8, "8 readers at once got identical, correct bytes")
        expect(b.stats()["fetches"] == 1, f"one fetch from the server: {b.stats()}")
        expect(server.stats()["hits"] - gets_before == 1,
               "the server served the 256 MiB file once")
        expect(server.stats()["files"]["files"]["hits"] - file_hits_before == 1,
               "the server counted that hit for the mount's namespace")
        a.stop()
        b.stop()

    def killed_writer(self):
        """A writer killed with its file open leaves nothing, here or on the server; a
        process that exits normally without closing its file (`cat > FILE`) stores it."""
        server = self.server("origin")
        a = self.mount("kw", server.url)
        victim = subprocess.Popen([sys.executable, "-c",
                                   "import os,signal,sys\n"
                                   "f = open(sys.argv[1], 'wb')\n"
                                   "f.write(b'half of it' * 100000)\n"
                                   "f.flush()\n"
                                   "os.kill(os.getpid(), signal.SIGKILL)", a.path("killed.bin")])
        victim.wait(timeout=60)
        expect(victim.returncode == -signal.SIGKILL, "the writer was killed with the file open")
        expect(not os.path.exists(a.path("killed.bin")), "its file is not there")
        cat = subprocess.run(f"head -c 300000 /dev/urandom > {a.path('src')} && "
                             f"cat {a.path('src')} > {a.path('copied')}", shell=True)
        expect(cat.returncode == 0 and
               open(a.path("copied"), "rb").read() == open(a.path("src"), "rb").read(),
               "a shell redirection stores the whole output")
        a.wait_uploaded()
        shared = sorted(e["path"] for e in server.files("files"))
        expect(shared == ["copied", "src"], f"the server has the two whole files only: {shared}")
        a.stop()

    def kill_during_writes(self):
        """kill -9 of the mount while files are written: a new mount finds each file absent
        or intact."""
        server = self.server("origin")
        state = os.path.join(self.work, "k-state")
        a = self.mount("k", server.url)
        # Four writers, each writing its files a quarter MiB at a time.
        writers = [subprocess.Popen([sys.executable, "-c",
                                     "import random,sys,time\n"
                                     "for i in range(int(sys.argv[2]), 40, 4):\n"
                                     "  data = random.Random(i).randbytes((i % 7 + 1) << 20)\n"
                                     "  with open(f'{sys.argv[1]}/f{i}', 'wb') as f:\n"
                                     "    for at in range(0, len(data), 1 << 18):\n"
                                     "      f.write(data[at:at + (1 << 18)])\n"
                                     "      time.sleep(0.002)",
                                     a.mountpoint, str(w)], stderr=subprocess.DEVNULL)
                   for w in range(4)]
        wait_until(lambda: len(os.listdir(a.mountpoint)) >= 8, 60, "8 files committed")
        a.kill()  # SIGKILL mid-write, then the dead mount is detached.
        for w in writers:
            w.wait(timeout=60)
        a = Mount(self.binary, a.mountpoint, server.url, state)
        self.cleanup.append(a.kill)
        present = 0
        for i in range(40):
            p = a.path(f"f{i}")
            if os.path.exists(p):
                present += 1
                expect(open(p, "rb").read() == content(i, (i % 7 + 1) << 20),
                       f"f{i} is intact after the kill")
        expect(0 < present < 40, f"{present} of 40 files were committed before the kill")
        a.stop()

    def corruption_never_served(self):
        """Flipped bytes on the server or in the mount's own store are never read."""
        server = self.server("origin")
        a = self.mount("c", server.url)
        data = content(21, 12 * MiB)
        with open(a.path("x.bin"), "wb") as f:
            f.write(data)
        a.wait_uploaded()
        blobs = os.listdir(os.path.join(server.dir, "large"))
        expect(len(blobs) == 1, "the server keeps the 12 MiB file in one blob file")
        flip(os.path.join(server.dir, "large", blobs[0]), 5 * MiB)
        b = self.mount("c2", server.url)
        err = errno_of(lambda: open(b.path("x.bin"), "rb").read())
        expect(err in (errno.EIO, errno.ENOENT),
               f"the corrupt copy on the server is not read through the mount ({err})")
        # The mount's own copy, corrupted on its disk.
        local = os.path.join(self.work, "c-state", "store", "large")
        flip(os.path.join(local, os.listdir(local)[0]), 9 * MiB)
        got = []
        err = errno_of(lambda: got.append(open(a.path("x.bin"), "rb").read()))
        expect(err == errno.EIO and not got, f"a corrupt local copy reads as EIO ({err})")
        a.stop()
        b.stop()

    def server_killed_during_reads(self):
        """With the server gone, every call returns within the client's timeouts, local files
        still read, and new names are misses."""
        server = self.server("origin")
        a = self.mount("s", server.url)
        for i in range(4):
            with open(a.path(f"f{i}"), "wb") as f:
                f.write(content(30 + i, 2 * MiB))
        a.wait_uploaded()
        b = self.mount("s2", server.url)
        expect(open(b.path("f0"), "rb").read() == content(30, 2 * MiB), "f0 read before the kill")
        server.stop(signal.SIGKILL)
        slowest = 0.0
        for call in (lambda: open(b.path("f0"), "rb").read(),
                     lambda: os.listdir(b.mountpoint),
                     lambda: os.path.exists(b.path("f1")),
                     lambda: os.path.exists(b.path("never-written")),
                     lambda: open(b.path("f2"), "rb").read()):
            start = time.time()
            errno_of(call)
            slowest = max(slowest, time.time() - start)
        expect(slowest < 6.0, f"every call returned within 6 s of the server's death "
               f"(slowest {slowest:.2f} s)")
        expect(open(b.path("f0"), "rb").read() == content(30, 2 * MiB),
               "what the mount holds still reads")
        b.stop()
        a.stop()
        # A server that hangs (stopped, its socket still accepting): each call waits at most
        # the client's request timeout, and only until the mount leaves the server alone.
        hung = self.server("hung")
        c = self.mount("s3", hung.url)
        with open(c.path("here"), "wb") as f:
            f.write(b"here")
        c.wait_uploaded()
        hung.proc.send_signal(signal.SIGSTOP)
        self.cleanup.append(lambda: hung.proc.send_signal(signal.SIGCONT))
        times = []
        for call in (lambda: os.path.exists(c.path("never-1")),
                     lambda: os.listdir(c.mountpoint),
                     lambda: os.path.exists(c.path("never-2")),
                     lambda: open(c.path("here"), "rb").read()):
            start = time.time()
            errno_of(call)
            times.append(time.time() - start)
        expect(max(times) < 6.0 and sum(times) < 8.0,
               f"with the server hung, calls took {', '.join(f'{t:.2f}' for t in times)} s "
               f"(5 s request timeout, then the server rests)")
        expect(open(c.path("here"), "rb").read() == b"here", "local files read meanwhile")
        hung.proc.send_signal(signal.SIGCONT)
        c.stop()

    def refusals(self):
        """Read-only mounts and names or files the mount cannot take get an errno."""
        server = self.server("origin")
        rw = self.mount("rw", server.url, args=["--max-size", "8M"])
        with open(rw.path("kept"), "wb") as f:
            f.write(b"kept")
        rw.wait_uploaded()
        expect(errno_of(lambda: open(rw.path("n" * 256), "wb")) == errno.ENAMETOOLONG,
               "a name over 255 bytes is ENAMETOOLONG")
        expect(errno_of(lambda: os.symlink("kept", rw.path("link"))) == errno.EPERM,
               "symlink is EPERM")
        expect(errno_of(lambda: os.link(rw.path("kept"), rw.path("hard"))) == errno.EPERM,
               "a hard link is EPERM")
        expect(errno_of(lambda: os.mkfifo(rw.path("fifo"))) == errno.EPERM, "a fifo is EPERM")
        expect(errno_of(lambda: os.rename(rw.path("kept"), rw.path("moved"))) == errno.EXDEV,
               "renaming a stored file is EXDEV")

        def too_big():
            with open(rw.path("huge"), "wb") as f:
                f.write(b"\0" * (9 * MiB))
        expect(errno_of(too_big) == errno.EFBIG, "a file over --max-size is EFBIG")
        expect(not os.path.exists(rw.path("huge")), "and is not stored")
        bad = os.path.join(os.fsencode(rw.mountpoint), b"bad\xff")
        expect(errno_of(lambda: open(bad, "wb")) == errno.EILSEQ, "a name that is not UTF-8 is "
               "EILSEQ")
        ro = self.mount("ro", server.url, args=["--readonly"])
        wait_until(lambda: os.path.exists(ro.path("kept")), 5, "the read-only mount to see kept")
        expect(open(ro.path("kept"), "rb").read() == b"kept", "a read-only mount reads")
        for what, call in (("create", lambda: open(ro.path("new"), "wb")),
                           ("write", lambda: open(ro.path("kept"), "r+b")),
                           ("mkdir", lambda: os.mkdir(ro.path("d"))),
                           ("unlink", lambda: os.remove(ro.path("kept"))),
                           ("rename", lambda: os.rename(ro.path("kept"), ro.path("k2")))):
            expect(errno_of(call) == errno.EROFS, f"{what} on a read-only mount is EROFS")
        ro.stop()
        rw.stop()

    def full_disk(self):
        """A full disk is ENOSPC at close, and nothing is committed."""
        server = self.server("origin")
        small = self.dir("tmpfs")
        # The store keeps 64 MiB free (so LevelDB can always compact): 100 MiB cannot be stored
        # on 160 MiB, while its spool fits.
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", small]).returncode:
            print("SKIP full_disk: cannot mount a tmpfs")
            return
        self.cleanup.append(lambda: subprocess.run(["umount", "-l", small]))
        m = Mount(self.binary, self.dir("fd"), server.url, os.path.join(small, "state"))
        self.cleanup.append(m.kill)

        def fill():
            with open(m.path("big"), "wb") as f:
                f.write(b"\1" * (100 * MiB))
        err = errno_of(fill)
        expect(err == errno.ENOSPC, f"writing past the free space is ENOSPC ({err})")
        expect(not os.path.exists(m.path("big")), "and nothing is committed")
        with open(m.path("fits"), "wb") as f:
            f.write(b"ok")
        expect(open(m.path("fits"), "rb").read() == b"ok", "a small file still fits afterwards")
        m.stop()

    def unmount_by_fusermount(self):
        server = self.server("origin")
        m = self.mount("u", server.url)
        subprocess.run(["fusermount3", "-u", m.mountpoint], check=True)
        expect(m.proc.wait(timeout=30) == 0, "fusermount3 -u ends the mount with exit 0")


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x5A]))


class JaxLruCache:
    """The file operations of jax._src.lru_cache.LRUCache (JAX 0.4.3x): <key>-cache and
    <key>-atime files in one directory and a .lockfile taken around puts (and gets, when a
    size cap is set); eviction removes least recently used entries past the cap."""

    def __init__(self, path, max_size):
        self.path = path
        self.max_size = max_size
        self.lock_path = os.path.join(path, ".lockfile")

    def _lock(self):
        f = open(self.lock_path, "a")
        fcntl.flock(f, fcntl.LOCK_EX)
        return f

    def get(self, key):
        cache_path = os.path.join(self.path, key + "-cache")
        lock = self._lock() if self.max_size > 0 else None
        try:
            if not os.path.exists(cache_path):
                return None
            if self.max_size > 0:
                with open(os.path.join(self.path, key + "-atime"), "wb") as f:
                    f.write(time.time_ns().to_bytes(8, "little"))
            with open(cache_path, "rb") as f:
                return f.read()
        finally:
            if lock:
                lock.close()

    def put(self, key, value):
        with self._lock():
            cache_path = os.path.join(self.path, key + "-cache")
            if os.path.exists(cache_path):
                return
            if self.max_size > 0:
                self._evict_if_needed(len(value))
            with open(cache_path, "wb") as f:
                f.write(value)
            if self.max_size > 0:
                with open(os.path.join(self.path, key + "-atime"), "wb") as f:
                    f.write(time.time_ns().to_bytes(8, "little"))

    def _evict_if_needed(self, additional):
        entries = []
        for name in os.listdir(self.path):
            if not name.endswith("-cache"):
                continue
            key = name[: -len("-cache")]
            atime_path = os.path.join(self.path, key + "-atime")
            atime = int.from_bytes(open(atime_path, "rb").read(), "little") \
                if os.path.exists(atime_path) else 0
            entries.append((atime, key, os.path.getsize(os.path.join(self.path, name))))
        total = sum(e[2] for e in entries) + additional
        for atime, key, size in sorted(entries):
            if total <= self.max_size:
                break
            os.remove(os.path.join(self.path, key + "-cache"))
            if os.path.exists(os.path.join(self.path, key + "-atime")):
                os.remove(os.path.join(self.path, key + "-atime"))
            total -= size


class Network:
    """Hosts in network namespaces joined by a bridge."""

    def __init__(self):
        self.prefix = f"hm{os.getpid() % 100000}"
        self.names = []
        self.addresses = {}

    def name(self, host):
        return self.prefix + host

    def address(self, host):
        return self.addresses[host]

    def launcher(self, host):
        return ["ip", "netns", "exec", self.name(host)]

    def build(self, hosts):
        switch = self.prefix + "sw"
        for n in [switch] + [self.name(h) for h in hosts]:
            subprocess.run(["ip", "netns", "add", n], check=True)
            self.names.append(n)
            subprocess.run(["ip", "-n", n, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "-n", switch, "link", "add", "br0", "type", "bridge"], check=True)
        subprocess.run(["ip", "-n", switch, "link", "set", "br0", "up"], check=True)
        for i, h in enumerate(hosts):
            self.addresses[h] = f"10.97.0.{i + 1}"
            port = "p-" + h
            subprocess.run(["ip", "-n", switch, "link", "add", port, "type", "veth", "peer",
                            "name", "eth0", "netns", self.name(h)], check=True)
            subprocess.run(["ip", "-n", switch, "link", "set", port, "master", "br0", "up"],
                           check=True)
            subprocess.run(["ip", "-n", self.name(h), "addr", "add",
                            self.addresses[h] + "/24", "dev", "eth0"], check=True)
            subprocess.run(["ip", "-n", self.name(h), "link", "set", "eth0", "up"], check=True)

    def teardown(self):
        for n in self.names:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    binary, xla = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if not os.path.exists("/dev/fuse"):
        print("SKIP: /dev/fuse is missing: FUSE mounts cannot be tested here")
        return SKIP
    names = sys.argv[3:] or ["round_trip", "partial_never_visible", "pytorch_xla_two_hosts",
                             "jax_lru_cache", "triton_and_inductor_renames",
                             "writers_and_readers_at_once", "killed_writer",
                             "kill_during_writes",
                             "corruption_never_served", "server_killed_during_reads",
                             "refusals", "full_disk", "unmount_by_fusermount"]
    failed = []
    for name in names:
        work = tempfile.mkdtemp(prefix=f"hlocache-mount-{name}-")
        os.chmod(work, 0o755)
        scenarios = Scenarios(binary, xla, work)
        print(f"--- {name}", flush=True)
        try:
            getattr(scenarios, name)()
        except Exception as e:  # Report every scenario, then fail.
            failed.append(name)
            print(f"FAILED {name}: {e}", flush=True)
            for log in sorted(os.listdir(work)):
                if log.endswith(".log"):
                    print(f"  {log}: " + open(os.path.join(work, log)).read()[-2000:])
        finally:
            scenarios.finish()
            shutil.rmtree(work, ignore_errors=True)
    if failed:
        print("failed:", ", ".join(failed))
        return 1
    print("all mount scenarios passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
