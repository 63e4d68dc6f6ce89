#!/usr/bin/python3
"""Instructions per write of two cluster-mode obsd hosts, under callgrind: a benchmark, not a test.

It starts a 3-member etcd cluster on loopback (Debian's etcd-server; data on tmpfs in /dev/shm)
and two hosts of the obsd build given, both under `valgrind --tool=callgrind`: host A takes
plain `set`s one at a time (a thousand keys in turn, each value new), host B applies them from
its watch (no watcher on it). After WARM writes it zeroes both hosts' counters, sends WRITES
more, waits until host B holds the last, dumps both profiles and prints each host's
instructions per write (user space, every thread). Counts repeat within a fraction of a percent
from run to run, where CPU times on a shared machine do not: for comparing two builds of the
write's path. The profiles stay in OUT.A.1 and OUT.B.1 for `callgrind_annotate`.

  swift build -c release --product obsd && cp .build/release/obsd /tmp/obsd-new
  /usr/bin/python3 Benchmarks/cluster-instructions.py /tmp/obsd-new --out /tmp/cg/new
"""
import argparse
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time

spec = importlib.util.spec_from_file_location(
    "cluster_host_cost", os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster-host-cost.py"))
cluster_host_cost = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cluster_host_cost)


def request(connection, line):
    connection.sendall(line + b"\n")
    answer = b""
    while not answer.endswith(b"\n"):
        chunk = connection.recv(65536)
        if not chunk:
            raise SystemExit("the host closed the connection")
        answer += chunk
    return answer


def totals(path):
    for line in open(path):
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit(f"no totals in {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("obsd", help="the obsd binary")
    parser.add_argument("--writes", type=int, default=2000, help="writes counted")
    parser.add_argument("--warm", type=int, default=500, help="writes before counting")
    parser.add_argument("--out", default=None, help="where the profiles go (default: a temporary directory)")
    options = parser.parse_args()
    for tool in ("valgrind", "callgrind_control", "etcd", "etcdctl"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is missing (apt-get install --no-upgrade valgrind etcd-server etcd-client)")
    directory = tempfile.mkdtemp(prefix="obsd-instructions-", dir="/dev/shm")
    out = options.out or os.path.join(directory, "callgrind")
    etcd, endpoints = cluster_host_cost.start_etcd(directory)
    hosts = []
    try:
        for name in "AB":
            hosts.append(subprocess.Popen(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.{name}", "--dump-instr=no", options.obsd,
                 "--socket", f"{directory}/{name}.sock", "--log-level", "error", "--cluster", "etcd",
                 "--etcd-endpoints", endpoints, "--etcd-prefix", "/instructions/", "--config", "/dev/null"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.time() + 120
        while not all(os.path.exists(f"{directory}/{name}.sock") for name in "AB"):
            if time.time() > deadline:
                raise SystemExit("the hosts did not start listening within 120 s")
            time.sleep(0.1)
        writer = socket.socket(socket.AF_UNIX)
        writer.connect(f"{directory}/A.sock")
        reader = socket.socket(socket.AF_UNIX)
        reader.connect(f"{directory}/B.sock")

        def write(count, base):
            for index in range(count):
                answer = request(writer, b'{"op":"set","key":"k%d","value":%d}' % (index % 1000, base + index))
                if b'"ok":true' not in answer:
                    raise SystemExit(f"a set failed: {answer!r}")
            last = b'{"op":"get","key":"k%d"}' % ((count - 1) % 1000)
            wanted = b'"value":%d' % (base + count - 1)
            while wanted not in request(reader, last):
                time.sleep(0.05)

        write(options.warm, 0)
        for host in hosts:
            subprocess.run(["callgrind_control", "-z", str(host.pid)], check=True, capture_output=True)
        started = time.time()
        write(options.writes, 10 ** 9)
        elapsed = time.time() - started
        for host in hosts:
            subprocess.run(["callgrind_control", "-d", str(host.pid)], check=True, capture_output=True)
        print(f"{options.writes} writes one at a time on host A ({options.writes / elapsed:.0f}/s under callgrind)")
        for name in "AB":
            path = f"{out}.{name}.1"
            deadline = time.time() + 30
            while not os.path.exists(path) and time.time() < deadline:
                time.sleep(0.1)
            role = "takes the writes" if name == "A" else "applies them"
            print(f"host {name} ({role}): {totals(path) / options.writes:,.0f} instructions per write ({path})")
    finally:
        for host in hosts:
            host.terminate()
            host.wait(60)
        for member in etcd:
            member.kill()
            member.wait()
        for member in ("m0", "m1", "m2"):
            shutil.rmtree(os.path.join(directory, member), ignore_errors=True)


if __name__ == "__main__":
    main()
