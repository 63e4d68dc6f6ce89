#!/usr/bin/python3
"""What one cluster-mode obsd host spends per write, for several builds side by side: a benchmark,
not a test.

It starts a 3-member etcd cluster on loopback (Debian's etcd-server; data on tmpfs in /dev/shm, as
only the host's cost is measured here) and one obsd host per build given, each in cluster mode
under a prefix of its own, its first endpoint member 1 (as `obsbench cluster`'s host A). Then,
round after round, each host in turn gets WRITES plain `set`s from IN_FLIGHT connections (one
write in flight on each), and the host's CPU time (user and system, /proc/PID/stat) is divided by
the writes. The builds alternate on one cluster within seconds of each other, so a shared machine's
drift falls on all alike; `obsbench cluster` gives the figures against raw etcd. It prints one line
per round and build, then each build's median.

  --strace   count the host's system calls per write (strace -c -f -p, which slows it: the CPU
             figures of such a run mean nothing)
  --perf F   record a profile of each round (perf record -g -p) into F.BUILD-INDEX.ROUND

  swift build -c release --product obsd && cp .build/release/obsd /tmp/obsd-new
  /usr/bin/python3 Benchmarks/cluster-host-cost.py /tmp/obsd-old /tmp/obsd-new --rounds 6
  /usr/bin/python3 Benchmarks/cluster-host-cost.py /tmp/obsd-new --in-flight 16 --strace
"""
import argparse
import os
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Host:
    """One obsd host and its connections, each with one write in flight at a time."""

    def __init__(self, path, index, directory, endpoints, in_flight):
        self.path = path
        self.socket = f"{directory}/h{index}.sock"
        self.process = subprocess.Popen(
            [path, "--socket", self.socket, "--log-level", "error", "--cluster", "etcd", "--etcd-endpoints", endpoints,
             "--etcd-prefix", f"/cost{index}/", "--config", "/dev/null"], stdout=subprocess.DEVNULL)
        deadline = time.time() + 30
        while not os.path.exists(self.socket):
            if time.time() > deadline or self.process.poll() is not None:
                raise SystemExit(f"{path} did not start listening")
            time.sleep(0.05)
        self.connections = []
        for _ in range(in_flight):
            connection = socket.socket(socket.AF_UNIX)
            connection.connect(self.socket)
            self.connections.append([connection, b""])
        self.sent = 0

    def send(self, index):
        line = b'{"op":"set","key":"k%d","value":%d}\n' % (self.sent % 1000, self.sent)
        self.connections[index][0].sendall(line)
        self.sent += 1

    def answered(self, index):
        connection = self.connections[index]
        while b"\n" not in connection[1]:
            chunk = connection[0].recv(65536)
            if not chunk:
                raise SystemExit(f"{self.path} closed the connection")
            connection[1] += chunk
        line, connection[1] = connection[1].split(b"\n", 1)
        if b'"ok":true' not in line:
            raise SystemExit(f"a write failed: {line.decode()}")

    def write(self, count):
        """Sends `count` sets, keeping one in flight on each connection, and waits for them all."""
        selector = selectors.DefaultSelector()
        for index, connection in enumerate(self.connections):
            selector.register(connection[0], selectors.EVENT_READ, index)
        started = min(count, len(self.connections))
        for index in range(started):
            self.send(index)
        done = 0
        while done < count:
            for key, _ in selector.select():
                self.answered(key.data)
                done += 1
                if started < count:
                    self.send(key.data)
                    started += 1
        selector.close()

    def stop(self):
        self.process.terminate()
        self.process.wait(10)


def start_etcd(directory):
    members = [(f"m{i}", f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}") for i in range(3)]
    initial = ",".join(f"{name}={peer}" for name, _, peer in members)
    processes = [subprocess.Popen(
        ["etcd", "--name", name, "--data-dir", f"{directory}/{name}", "--listen-client-urls", client,
         "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
         "--initial-cluster", initial, "--initial-cluster-state", "new", "--initial-cluster-token", "cost",
         "--logger", "zap", "--log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for name, client, peer in members]
    endpoints = ",".join(client for _, client, _ in members)
    deadline = time.time() + 60
    while subprocess.run(["etcdctl", "--endpoints", endpoints, "endpoint", "health"], capture_output=True).returncode:
        if time.time() > deadline:
            raise SystemExit("etcd did not become healthy")
        time.sleep(0.2)
    return processes, endpoints


def strace_counts(path, writes):
    """System calls per write from a file of strace -c, largest first."""
    rows = []
    for line in open(path):
        fields = line.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            rows.append((int(fields[3]), fields[-1]))
    rows.sort(reverse=True)
    total = sum(calls for calls, _ in rows) / writes
    return f"{total:.2f} system calls per write: " + ", ".join(
        f"{name} {calls / writes:.2f}" for calls, name in rows if calls / writes >= 0.01)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("builds", nargs="+", help="obsd binaries")
    parser.add_argument("--writes", type=int, default=4000, help="sets per round and build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=1)
    parser.add_argument("--strace", action="store_true")
    parser.add_argument("--perf", metavar="F")
    options = parser.parse_args()

    directory = tempfile.mkdtemp(prefix="obsd-cost-", dir="/dev/shm")
    etcd, hosts = [], []
    try:
        etcd, endpoints = start_etcd(directory)
        hosts = [Host(path, index, directory, endpoints, options.in_flight) for index, path in enumerate(options.builds)]
        for host in hosts:
            host.write(500)  # connections made, caches warm
        figures = {index: [] for index in range(len(hosts))}
        for round in range(options.rounds):
            for index, host in enumerate(hosts):
                tracer = None
                if options.strace:
                    output = f"{directory}/strace.{index}.{round}"
                    tracer = subprocess.Popen(["strace", "-c", "-f", "-o", output, "-p", str(host.process.pid)],
                                              stderr=subprocess.DEVNULL)
                elif options.perf:
                    tracer = subprocess.Popen(["perf", "record", "-g", "-o", f"{options.perf}.{index}.{round}", "-p",
                                               str(host.process.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if tracer:
                    time.sleep(1)  # attached
                cpu, wall = cpu_seconds(host.process.pid), time.time()
                host.write(options.writes)
                cpu, wall = cpu_seconds(host.process.pid) - cpu, time.time() - wall
                if tracer:
                    tracer.send_signal(signal.SIGINT)
                    tracer.wait()
                figures[index].append(cpu * 1e6 / options.writes)
                print(f"round {round + 1}, {host.path}: {options.writes} writes, {options.in_flight} in flight: "
                      f"{options.writes / wall:.0f}/s, {figures[index][-1]:.1f} µs of CPU per write", flush=True)
                if options.strace:
                    print("  " + strace_counts(output, options.writes), flush=True)
        for index, host in enumerate(hosts):
            print(f"{host.path}: median {statistics.median(figures[index]):.1f} µs per write ("
                  + ", ".join(f"{figure:.0f}" for figure in figures[index]) + ")")
    finally:
        for host in hosts:
            host.stop()
        for process in etcd:
            process.kill()
            process.wait()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
