#!/usr/bin/env python3
"""Several hosts on one machine: an origin and two worker hosts, each in its own network
namespace, joined by veth pairs to a bridge in a fourth namespace. Each worker host runs a
per-host `hlocache serve --upstream` and two client processes (`hlocache run --cache`).

It asserts that each graph is compiled once, on the origin; that the second host is served
from the origin without compiling; and that once the origin's link is cut, the worker hosts
keep serving local hits and still finish misses by compiling locally, then upload what they
built when the link comes back.

Usage: multi_host_test.py HLOCACHE_BINARY. Exit 0 on success, 1 on failure, 77 (skipped) only
where the kernel refuses network namespaces.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from netns_hosts import (SKIP, Network, checksums, expect, finish_clients, graph,
                         namespaces_refused, server_stats, start_clients, start_server)

PREFIX = f"hc{os.getpid() % 100000}"
HOSTS = {"origin": "10.98.0.1", "a": "10.98.0.2", "b": "10.98.0.3"}
PORT = 7070
HOST_TOKEN = "per-host-upload-token-0123456789"


class Fleet:
    def __init__(self, binary, work):
        self.binary = binary
        self.work = work
        self.servers = {}
        self.network = Network(PREFIX, HOSTS)

    def build_network(self):
        self.network.build()

    def set_origin_link(self, up):
        self.network.set_link("origin", up)

    def teardown(self):
        for proc in self.servers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.network.remove()

    def start_server(self, host, args):
        self.servers[host] = start_server(self.binary, self.network.ns(host),
                                          os.path.join(self.work, host), args,
                                          os.path.join(self.work, host + ".log"))

    def log(self, host):
        return open(os.path.join(self.work, host + ".log")).read()

    def stats(self, host, address="127.0.0.1"):
        return server_stats(self.network.ns(host), f"http://{address}:{PORT}", HOST_TOKEN)

    def run_clients(self, host, graphs, clients=2):
        """Starts `clients` processes on `host`, each running every graph in turn through the
        host's server; returns their outputs once all have finished."""
        procs = start_clients(self.binary, self.network.ns(host), PORT, [graphs] * clients)
        return finish_clients(host, procs)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = os.path.abspath(sys.argv[1])
    refused = namespaces_refused(PREFIX)
    if refused:
        print(f"SKIP: {refused}")
        return SKIP

    work = tempfile.mkdtemp(prefix="hlocache-multi-host-")
    fleet = Fleet(binary, work)
    try:
        fleet.build_network()
        graphs = []
        for v in range(1, 5):
            path = os.path.join(work, f"graph{v}.hlo")
            with open(path, "w") as f:
                f.write(graph("fleet", v))
            graphs.append(path)
        tokens = os.path.join(work, "tokens")
        with open(tokens, "w") as f:
            f.write(f"write {HOST_TOKEN}\n")
        origin_url = f"http://{HOSTS['origin']}:{PORT}"
        fleet.start_server("origin", ["--listen", f"{HOSTS['origin']}:{PORT}", "--tokens", tokens])
        for host in ("a", "b"):
            fleet.start_server(host, ["--listen", f"127.0.0.1:{PORT}", "--upstream", origin_url,
                                      "--upstream-token", HOST_TOKEN])

        first = graphs[:3]
        # Host a, cold: its two processes ask for three graphs at once.
        out_a = fleet.run_clients("a", first)
        origin = fleet.stats("origin", HOSTS["origin"])
        expect(origin["compiles"] == 3, f"the origin compiled each graph once (compiles={origin['compiles']})")
        a = fleet.stats("a")
        expect(a["compiles"] == 0, f"host a compiled nothing itself (compiles={a['compiles']})")
        expect(a["upstream"]["failures"] == 0, "host a reached the origin every time")

        # Host b: served from the origin, nothing compiled anywhere.
        out_b = fleet.run_clients("b", first)
        origin = fleet.stats("origin", HOSTS["origin"])
        b = fleet.stats("b")
        expect(origin["compiles"] == 3, f"host b's requests compiled nothing on the origin (compiles={origin['compiles']})")
        expect(b["compiles"] == 0, f"host b compiled nothing (compiles={b['compiles']})")
        expect(b["upstream"]["fetches"] + b["upstream"]["compiles"] >= 3,
               "host b got every graph from the origin")
        expect(origin["hits"] >= 3, f"the origin answered host b from its store (hits={origin['hits']})")
        expect(all(checksums(o) == checksums(out_a[0]) for o in out_a + out_b) and checksums(out_a[0]),
               "every process on both hosts computed the same results")

        # The origin's link is cut.
        fleet.set_origin_link(False)
        out_cut = fleet.run_clients("a", first)
        a = fleet.stats("a")
        expect(all(checksums(o) == checksums(out_a[0]) for o in out_cut),
               "host a still serves its local hits without the origin")
        expect(a["compiles"] == 0, "local hits needed no compile")
        out_new_a = fleet.run_clients("a", [graphs[3]])
        a = fleet.stats("a")
        expect(a["compiles"] == 1, f"host a finished the new graph by compiling it itself (compiles={a['compiles']})")
        expect(a["upstream"]["up"] is False and a["upstream"]["failures"] >= 1,
               "host a counts the unreachable origin")
        expect(a["upstream"]["pending_uploads"] == 1, "host a holds its new artifact for the origin")
        out_new_b = fleet.run_clients("b", [graphs[3]])
        b = fleet.stats("b")
        expect(b["compiles"] == 1, "host b also finished the new graph alone")
        expect(checksums(out_new_a[0]) == checksums(out_new_b[0]) and checksums(out_new_a[0]),
               "both hosts' local builds agree")

        # The link comes back: the hosts upload what they built, the origin compiles nothing.
        fleet.set_origin_link(True)
        deadline = time.time() + 90
        while time.time() < deadline:
            a, b = fleet.stats("a"), fleet.stats("b")
            if a["upstream"]["pending_uploads"] == 0 and b["upstream"]["pending_uploads"] == 0:
                break
            time.sleep(0.5)
        expect(a["upstream"]["pending_uploads"] == 0 and a["upstream"]["uploads"] >= 1,
               f"host a caught up with the origin ({a['upstream']})")
        expect(b["upstream"]["pending_uploads"] == 0, f"host b caught up ({b['upstream']})")
        origin = fleet.stats("origin", HOSTS["origin"])
        expect(origin["entries"] == 4, f"the origin holds all four graphs (entries={origin['entries']})")
        expect(origin["compiles"] == 3, "the origin never compiled the graph the hosts built")
        print("multi-host: ok")
        return 0
    except (AssertionError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        detail = e.stderr if isinstance(e, subprocess.CalledProcessError) else ""
        print(f"FAIL: {e} {detail}")
        for host in fleet.servers:
            print(f"--- {host} server log ---\n{fleet.log(host)[-3000:]}")
        return 1
    finally:
        fleet.teardown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
