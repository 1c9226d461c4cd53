#!/usr/bin/python3
"""The HTTP API spec (schema/http-api.yaml) against a running server: the spec parses as YAML,
names every route the server takes, and the server takes every method the spec lists for each
of its paths (a route it lacked would answer "no such route"; a method it lacked, 405).

Usage: http_api_test.py SOURCE_DIR HLOCACHE_BINARY
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

# Routes the server registers (server/*_routes.cc), as the spec writes them.
SERVED = {"/v1/artifacts/{key}", "/v1/files/{namespace}", "/v1/compile", "/v1/keys", "/v1/stats",
          "/metrics", "/healthz"}
KEY = "v1-" + "0123456789abcdef" * 2


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def start_server(binary, store):
    server = subprocess.Popen([binary, "serve", "--dir", store, "--listen", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    info = os.path.join(store, "server.json")
    for _ in range(300):
        if os.path.exists(info):
            with open(info) as f:
                listen = json.load(f)["listen"]
            return server, int(listen.rsplit(":", 1)[1])
        if server.poll() is not None:
            fail("the server exited: " + server.stdout.read().decode(errors="replace"))
        time.sleep(0.05)
    server.kill()
    fail("the server did not write server.json")


def main():
    source, binary = sys.argv[1], sys.argv[2]
    with open(os.path.join(source, "schema", "http-api.yaml")) as f:
        spec = yaml.safe_load(f)
    paths = spec.get("paths") or {}
    if set(paths) != SERVED:
        fail("the spec's paths %s are not the served routes %s" % (sorted(paths), sorted(SERVED)))

    store = tempfile.mkdtemp(prefix="hlocache-http-api-")
    server, port = start_server(binary, store)
    checked = 0
    try:
        for path, methods in paths.items():
            for method in methods:
                if method not in ("get", "head", "put", "post", "delete"):
                    continue
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                target = path.replace("{key}", KEY).replace("{namespace}", "files")
                conn.request(method.upper(), target, body=b"", headers={"Content-Length": "0"})
                reply = conn.getresponse()
                body = reply.read().decode(errors="replace")
                conn.close()
                if reply.status == 405 or "no such route" in body:
                    fail("%s %s: the spec lists it, the server answers %d %s" %
                         (method.upper(), path, reply.status, body.strip()))
                checked += 1
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(store, ignore_errors=True)
    if checked < len(SERVED):
        fail("only %d methods checked" % checked)
    print("http-api.yaml: %d routes, %d methods, all served" % (len(paths), checked))


if __name__ == "__main__":
    main()
