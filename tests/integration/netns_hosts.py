"""Several hosts on one machine for the fleet tests: network namespaces joined by veth pairs to
a bridge in one more namespace, and what those tests share (servers started in a host, a
small graph, result lines, assertions that print as they pass)."""
import json
import os
import shutil
import subprocess
import time

SKIP = 77


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def namespaces_refused(prefix):
    """Why this machine cannot make network namespaces, or None when it can."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    probe = ip("netns", "add", prefix + "probe", check=False)
    if probe.returncode != 0:
        return f"this kernel or user cannot make network namespaces: {probe.stderr.strip()}"
    ip("netns", "del", prefix + "probe", check=False)
    return None


class Network:
    """`hosts` ({name: address}) each in a namespace PREFIX+name, on a bridge in PREFIX+"sw"."""

    def __init__(self, prefix, hosts):
        self.prefix = prefix
        self.hosts = hosts
        self.switch = prefix + "sw"
        self.made = []

    def ns(self, host):
        return self.prefix + host

    def build(self):
        for name in [self.switch] + [self.ns(h) for h in self.hosts]:
            ip("netns", "add", name)
            self.made.append(name)
            ip("-n", name, "link", "set", "lo", "up")
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        for host, address in self.hosts.items():
            port = "p-" + host
            ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0",
               "netns", self.ns(host))
            ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            ip("-n", self.ns(host), "addr", "add", address + "/24", "dev", "eth0")
            ip("-n", self.ns(host), "link", "set", "eth0", "up")

    def set_link(self, host, up):
        ip("-n", self.switch, "link", "set", "p-" + host, "up" if up else "down")

    def remove(self):
        for name in self.made:
            ip("netns", "del", name, check=False)


def start_server(binary, namespace, store, args, log_path, env=None):
    """`hlocache serve --dir STORE ARGS` in `namespace`, once it has written its server.json."""
    log = open(log_path, "a")
    proc = subprocess.Popen(["ip", "netns", "exec", namespace, binary, "serve", "--dir", store,
                             "--access-log", "", *args], stdout=log, stderr=subprocess.STDOUT,
                            env=env)
    info = os.path.join(store, "server.json")
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{namespace}: server exited: {open(log_path).read()}")
        if os.path.exists(info):
            try:
                if json.load(open(info)).get("pid") == proc.pid:
                    return proc
            except ValueError:
                pass  # Being written.
        time.sleep(0.05)
    raise AssertionError(f"{namespace}: server did not start: {open(log_path).read()}")


def server_stats(namespace, url, token):
    """GET URL/v1/stats from inside `namespace`, with a bearer token."""
    fetch = ("import sys, urllib.request; "
             "r = urllib.request.Request(sys.argv[1], headers={'Authorization': sys.argv[2]}); "
             "print(urllib.request.urlopen(r, timeout=10).read().decode())")
    r = subprocess.run(["ip", "netns", "exec", namespace, "python3", "-c", fetch,
                        url + "/v1/stats", f"Bearer {token}"], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"{namespace}: /v1/stats: {r.stderr}")
    return json.loads(r.stdout)


def start_clients(binary, namespace, port, turns):
    """One process in `namespace` per list of `turns`, each running its graphs in order through
    the server on 127.0.0.1:`port` (`hlocache run --cache`), stopping at the first failure."""
    procs = []
    for graphs in turns:
        script = "; ".join(
            f"{binary} run --cache http://127.0.0.1:{port} --seed 7 {g} || exit 1" for g in graphs)
        procs.append(subprocess.Popen(["ip", "netns", "exec", namespace, "bash", "-c", script],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    return procs


def finish_clients(host, procs):
    """The outputs of `procs` once all have finished; an AssertionError when one failed."""
    outputs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise AssertionError(f"{host}: a client failed:\n{out}")
        outputs.append(out)
    return outputs


def graph(name, variant, rows=32):
    """A small module whose results depend on `variant`."""
    return (f"HloModule {name}{variant}\nENTRY e {{\n  x = f32[{rows},16] parameter(0)\n"
            f"  w = f32[16,8] parameter(1)\n  d = f32[{rows},8] dot(x, w), lhs_contracting_dims={{1}}, "
            f"rhs_contracting_dims={{0}}\n  k = f32[] constant({variant})\n"
            f"  b = f32[{rows},8] broadcast(k), dimensions={{}}\n  ROOT y = f32[{rows},8] add(d, b)\n}}\n")


def expect(condition, message):
    if not condition:
        raise AssertionError(message)
    print("ok:", message, flush=True)


def checksums(output):
    """The lines a run prints for its results (shape and checksum), without timings."""
    return [line for line in output.splitlines() if "xxh3=" in line]
