#!/usr/bin/env python3
"""bench_pending_mem.py - the controller's memory for each job not finished.

    CORRAL_BIN=build/corral CORRAL_DATA=data bench/controller/bench_pending_mem.py [N]

Starts a fresh controller (no agents, so every job stays pending), submits
100 warm-up jobs, then N more (default 5000) one-GPU jobs over one
keep-alive connection, and prints the growth of the live heap
(corral_heap_bytes{kind="in_use"} from /metrics) and of the RSS, per job.
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    if not 1 <= n <= 1000000:
        sys.exit("bench_pending_mem: N must be 1..1000000")
    binary = os.environ.get("CORRAL_BIN", "build/corral")
    d = tempfile.mkdtemp(prefix="corral-pendmem-")
    log = open(os.path.join(d, "ctl.log"), "w")
    p = subprocess.Popen([binary, "controller", "--state-dir", d + "/st", "--listen",
                          "127.0.0.1:0"], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(300):
            if os.path.exists(d + "/st/listen.addr") and os.path.exists(d + "/st/admin.token"):
                break
            time.sleep(0.05)
        else:
            sys.exit("bench_pending_mem: the controller did not start (see %s/ctl.log)" % d)
        time.sleep(0.3)
        host, port = open(d + "/st/listen.addr").read().strip().replace("http://", "").rsplit(":", 1)
        tok = open(d + "/st/admin.token").read().strip()
        c = http.client.HTTPConnection(host, int(port))
        hdr = {"Authorization": "Bearer " + tok, "Content-Type": "application/json"}

        def heap():
            c.request("GET", "/metrics", headers=hdr)
            body = c.getresponse().read().decode()
            m = re.search(r'^corral_heap_bytes\{kind="in_use"\} (\S+)', body, re.M)
            return float(m.group(1))

        def rss():
            for line in open("/proc/%d/status" % p.pid):
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) * 1024
            return 0

        job = json.dumps({"name": "pend", "command": ["true"], "gpus": 1, "max_retries": 0})

        def submit(k):
            for _ in range(k):
                c.request("POST", "/v1/jobs", body=job, headers=hdr)
                r = c.getresponse()
                r.read()
                if r.status != 201:
                    sys.exit("bench_pending_mem: submit answered %d" % r.status)

        submit(100)
        time.sleep(1)
        h0, r0 = heap(), rss()
        submit(n)
        time.sleep(2)
        h1, r1 = heap(), rss()
        print("%d pending jobs: live heap +%.0f B a job, RSS +%.0f B a job"
              % (n, (h1 - h0) / n, (r1 - r0) / n))
    finally:
        p.terminate()
        p.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
