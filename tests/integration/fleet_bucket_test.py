#!/usr/bin/env python3
"""A fleet on one bucket: two origins and two worker hosts, each in its own network namespace,
and a Ceph cluster (monitor, two OSDs, RADOS Gateway) in a fifth, all joined by veth pairs to
a bridge. Each origin runs `hlocache serve --upstream s3://BUCKET`; each worker host runs
`hlocache serve --upstream ORIGIN1,ORIGIN2,s3://BUCKET` and four client processes
(`hlocache run --cache http://127.0.0.1:PORT`).

It asserts that:
- cold, 2 hosts x 4 processes x 12 graphs compile each graph exactly once, across both
  origins (each compiles some: rendezvous hashing spreads the keys), and nothing on the hosts;
- warm, nothing compiles;
- new hosts with empty disks compile nothing and take every artifact from the bucket, without
  asking an origin;
- an origin killed mid-run: its keys are compiled by the other origin, which compiles nothing
  the dead one had already put in the bucket, and no client fails;
- the gateway stopped: the hosts serve what they hold, misses are compiled by the origins, and
  what the origins compiled waits in their upload queues, then drains into the bucket once the
  gateway is back (new hosts then compile nothing).

Usage: fleet_bucket_test.py HLOCACHE_BINARY CEPH_CLUSTER_SCRIPT. Exit 0 on success, 1 on
failure, 77 (skipped) only where the kernel refuses network namespaces or Ceph is not
installed.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from netns_hosts import (SKIP, Network, checksums, expect, finish_clients, graph,
                         namespaces_refused, server_stats, start_clients, start_server)

PREFIX = f"hb{os.getpid() % 100000}"
HOSTS = {"o1": "10.97.0.1", "o2": "10.97.0.2", "a": "10.97.0.3", "b": "10.97.0.4",
         "s3": "10.97.0.9"}
PORT = 7070
BUCKET = "s3://hlocache-test/fleet"
PROCESSES = 4
TOKEN = "fleet-bucket-host-token-0123456789"


class Fleet:
    def __init__(self, binary, ceph_script, work):
        self.binary = binary
        self.ceph_script = ceph_script
        self.work = work
        self.ceph_dir = os.path.join(work, "ceph")
        self.servers = {}
        self.network = Network(PREFIX, HOSTS)
        self.env = dict(os.environ)
        self.generation = 0

    def ns(self, host):
        return self.network.ns(host)

    # --- the network and the cluster -----------------------------------------------------------
    def build_network(self):
        self.network.build()

    def ceph(self, *args, check=True):
        env = dict(os.environ, CEPH_RGW_ADDRESS=HOSTS["s3"])
        r = subprocess.run(["ip", "netns", "exec", self.ns("s3"), "bash", self.ceph_script, args[0],
                            self.ceph_dir, *args[1:]], capture_output=True, text=True, env=env,
                           timeout=300)
        if check and r.returncode != 0:
            if r.returncode == SKIP:
                raise SkipTest(r.stderr.strip())
            raise AssertionError(f"ceph_cluster.sh {' '.join(args)}: {r.stdout}{r.stderr}")
        return r

    def start_cluster(self):
        print(self.ceph("start").stdout.strip(), flush=True)
        with open(os.path.join(self.ceph_dir, "env")) as f:
            for line in f:
                name, _, value = line.strip().partition("=")
                if name:
                    self.env[name] = value

    def teardown(self):
        for proc in self.servers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if os.path.isdir(self.ceph_dir):
            self.ceph("stop", check=False)
        self.network.remove()

    # --- servers ----------------------------------------------------------------------------------
    def url(self, host):
        return f"http://{HOSTS[host]}:{PORT}"

    def start_server(self, host, upstream, fresh=False):
        if fresh:
            self.generation += 1
        if host.startswith("o"):  # An origin: on the network, with tokens.
            tokens = os.path.join(self.work, "tokens")
            with open(tokens, "w") as f:
                f.write(f"write {TOKEN}\n")
            where = ["--listen", f"{HOSTS[host]}:{PORT}", "--tokens", tokens]
        else:
            where = ["--listen", f"127.0.0.1:{PORT}", "--upstream-token", TOKEN]
        self.servers[host] = start_server(
            self.binary, self.ns(host), os.path.join(self.work, f"{host}-{self.generation}"),
            [*where, "--upstream", upstream, "--compile-workers", "2"],
            os.path.join(self.work, host + ".log"), env=self.env)

    def start_host(self, host, fresh=False):
        self.start_server(host, f"{self.url('o1')},{self.url('o2')},{BUCKET}", fresh)

    def stop_server(self, host, sig=signal.SIGTERM):
        proc = self.servers.pop(host)
        proc.send_signal(sig)
        proc.wait(timeout=60)

    def log(self, host):
        return open(os.path.join(self.work, host + ".log")).read()

    def stats(self, host):
        address = HOSTS[host] if host.startswith("o") else "127.0.0.1"
        return server_stats(self.ns(host), f"http://{address}:{PORT}", TOKEN)

    def compiles(self, *hosts):
        return sum(self.stats(h)["compiles"] for h in hosts)

    # --- clients ----------------------------------------------------------------------------------
    def start_clients(self, host, graphs):
        """PROCESSES processes on `host`, each running every graph in turn (from a different
        one, so they overlap) through the host's server."""
        turns = [graphs[i % len(graphs):] + graphs[:i % len(graphs)] for i in range(PROCESSES)]
        return start_clients(self.binary, self.ns(host), PORT, turns)

    @staticmethod
    def finish(host, procs):
        return finish_clients(host, procs)

    def run_both(self, graphs):
        started = {h: self.start_clients(h, graphs) for h in ("a", "b")}
        return {h: self.finish(h, procs) for h, procs in started.items()}


class SkipTest(Exception):
    pass


def same_results(outputs, reference):
    lines = [sorted(checksums(o)) for procs in outputs.values() for o in procs]
    return bool(reference) and all(l == reference for l in lines)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary = os.path.abspath(sys.argv[1])
    ceph_script = os.path.abspath(sys.argv[2])
    refused = namespaces_refused(PREFIX)
    if refused:
        print(f"SKIP: {refused}")
        return SKIP

    work = tempfile.mkdtemp(prefix="hlocache-fleet-bucket-")
    fleet = Fleet(binary, ceph_script, work)
    try:
        fleet.build_network()
        fleet.start_cluster()

        def write_graphs(first, count):
            paths = []
            for v in range(first, first + count):
                path = os.path.join(work, f"graph{v}.hlo")
                with open(path, "w") as f:
                    f.write(graph("bucket", v, rows=24))
                paths.append(path)
            return paths

        graphs = write_graphs(1, 12)
        for origin in ("o1", "o2"):
            fleet.start_server(origin, BUCKET)
        for host in ("a", "b"):
            fleet.start_host(host)

        # Cold: both hosts' eight processes ask for the twelve graphs at once.
        cold = fleet.run_both(graphs)
        reference = sorted(checksums(cold["a"][0]))
        expect(len(reference) == 12, "a process printed a result for each graph")
        expect(same_results(cold, reference), "every process on both hosts computed the same results")
        o1, o2 = fleet.stats("o1"), fleet.stats("o2")
        expect(o1["compiles"] + o2["compiles"] == 12,
               f"cold: each graph compiled exactly once across both origins "
               f"(o1 {o1['compiles']}, o2 {o2['compiles']})")
        expect(o1["compiles"] > 0 and o2["compiles"] > 0,
               "both origins compiled some of the graphs (keys spread over them)")
        expect(fleet.compiles("a", "b") == 0, "the hosts compiled nothing themselves")
        expect(o1["upstream"]["uploads"] + o2["upstream"]["uploads"] == 12,
               "the origins put each artifact in the bucket")

        # Warm: nothing compiles anywhere.
        fleet.run_both(graphs)
        expect(fleet.compiles("o1", "o2") == 12, "warm: no origin compiled anything more")
        expect(fleet.compiles("a", "b") == 0, "warm: no host compiled anything")

        # New hosts with empty disks: everything from the bucket, no origin asked.
        asked_before = {o: fleet.stats(o)["hits"] + fleet.stats(o)["misses"] for o in ("o1", "o2")}
        for host in ("a", "b"):
            fleet.stop_server(host)
            fleet.start_host(host, fresh=True)
        fresh = fleet.run_both(graphs)
        expect(same_results(fresh, reference), "new hosts computed the same results")
        expect(fleet.compiles("a", "b", "o1", "o2") == 12, "new hosts: nothing compiled anywhere")
        for host in ("a", "b"):
            fetched = fleet.stats(host)["upstream"]["fetches"]
            expect(fetched == 12, f"new host {host} took all 12 artifacts from the bucket ({fetched})")
        asked_after = {o: fleet.stats(o)["hits"] + fleet.stats(o)["misses"] for o in ("o1", "o2")}
        expect(asked_after == asked_before, "new hosts asked no origin for anything")

        # An origin killed mid-run: the other takes its keys over.
        more = write_graphs(13, 12)
        o2_before = fleet.stats("o2")["compiles"]
        o1_before = fleet.stats("o1")["compiles"]
        started = {h: fleet.start_clients(h, more) for h in ("a", "b")}
        deadline = time.time() + 120
        o1_done = 0
        while time.time() < deadline:
            o1_done = fleet.stats("o1")["compiles"] - o1_before
            if o1_done >= 2:
                break
            time.sleep(0.02)
        fleet.stop_server("o1", signal.SIGKILL)
        print(f"killed origin o1 after it compiled {o1_done} of the new graphs", flush=True)
        killed = {h: fleet.finish(h, procs) for h, procs in started.items()}
        more_reference = sorted(checksums(killed["a"][0]))
        expect(len(more_reference) == 12 and same_results(killed, more_reference),
               "no client failed, and every process computed the same results")
        o2_new = fleet.stats("o2")["compiles"] - o2_before
        expect(fleet.compiles("a", "b") == 0, "the hosts still compiled nothing themselves")
        expect(1 <= o2_new <= 12 - o1_done,
               f"o2 took over o1's keys ({o2_new} compiles) and compiled none of the {o1_done} "
               f"o1 had already put in the bucket")
        tried_o1 = 0
        for host in ("a", "b"):
            parts = {p["url"]: p for p in fleet.stats(host)["upstream"]["parts"]}
            expect(sorted(parts) == sorted([fleet.url("o1"), fleet.url("o2"), BUCKET]),
                   f"host {host} counts each origin and the bucket on its own")
            tried_o1 += parts[fleet.url("o1")]["failures"] + parts[fleet.url("o1")]["skipped"]
        expect(tried_o1 > 0, f"the hosts found o1 gone ({tried_o1} requests failed or skipped) "
                             "and sent its keys to o2")
        fleet.start_server("o1", BUCKET)

        # The gateway stopped: hosts serve what they hold; misses compile on the origins, whose
        # uploads wait, then drain once the gateway is back.
        fleet.ceph("stop-rgw")
        held = fleet.run_both(graphs[:4])
        expect(all(len(checksums(o)) == 4 and set(checksums(o)) <= set(reference)
                   for procs in held.values() for o in procs),
               "without the gateway, the hosts served what they hold, with the same results")
        expect(fleet.compiles("a", "b") == 0, "local hits needed no compile")
        last = write_graphs(25, 3)
        compiles_before = fleet.compiles("o1", "o2")
        started_at = time.time()
        fleet.finish("a", fleet.start_clients("a", last))
        took = time.time() - started_at
        expect(fleet.compiles("o1", "o2") - compiles_before == 3,
               f"without the bucket, the origins compiled the 3 new graphs ({took:.1f} s)")
        pending = fleet.stats("o1")["upstream"]["pending_uploads"] + \
            fleet.stats("o2")["upstream"]["pending_uploads"]
        expect(pending == 3, f"the origins hold the 3 artifacts for the bucket ({pending} queued)")
        fleet.ceph("start-rgw")
        deadline = time.time() + 90
        while time.time() < deadline:
            pending = fleet.stats("o1")["upstream"]["pending_uploads"] + \
                fleet.stats("o2")["upstream"]["pending_uploads"]
            if pending == 0:
                break
            time.sleep(0.5)
        expect(pending == 0, "the origins' uploads drained into the bucket once the gateway was back")
        fleet.stop_server("b")
        fleet.start_host("b", fresh=True)
        compiles_before = fleet.compiles("o1", "o2")
        fleet.finish("b", fleet.start_clients("b", last))
        expect(fleet.compiles("o1", "o2", "b") == compiles_before,
               "a new host then took those 3 from the bucket, compiling nothing")
        expect(fleet.stats("b")["upstream"]["fetches"] == 3, "... all 3 fetched from the bucket")
        print("fleet on a bucket: ok")
        return 0
    except SkipTest as e:
        print(f"SKIP: {e}")
        return SKIP
    except (AssertionError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        detail = e.stderr if isinstance(e, subprocess.CalledProcessError) else ""
        print(f"FAIL: {e} {detail}")
        for host in ("o1", "o2", "a", "b"):
            path = os.path.join(work, host + ".log")
            if os.path.exists(path):
                print(f"--- {host} server log ---\n{open(path).read()[-3000:]}")
        return 1
    finally:
        fleet.teardown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
