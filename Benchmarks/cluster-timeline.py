#!/usr/bin/python3
"""Where one cluster write's time goes, step by step: obsd against raw etcd. A benchmark, not a test.

`obsbench cluster` gives each column's whole latency and throughput; this tells what a write one at
a time is made of. It runs `obsbench cluster --raw-watches 1 --rounds 1 --in-flight 1 --samples 10`
under bpftrace, which records the time of every read and write system call of obsbench's and
obsd's threads (and when each of those threads was woken and when it got a CPU), finds which
descriptor is which connection (`ss`, sampled while the benchmark runs), and cuts each write
sent right after the answer to the one before (the acknowledgement and 1-in-flight rows; the
short latency rows, where a write also waits for the watcher's event, are left out) into its
steps, from one answer to the next:

  obsd      obsbench reads an answer -> sends the next `set` -> host A reads it -> host A sends
            etcd the put -> host A reads the first bytes of etcd's answer (or of its watch's
            copy) -> host A answers -> obsbench reads the answer
  raw etcd  obsbench reads a put's answer -> sends the next put -> reads its answer

Each step's mean and median are printed in microseconds, with the time each process spent
waiting for a CPU within a write. Tracing slows every system call a little, and obsd's path has
more of them, so the figures are for the steps' shares, not for the ratios, which `obsbench
cluster` gives without tracing.

Needs root and bpftrace (`apt-get install --no-upgrade bpftrace`), and release builds:
  swift build -c release --product obsd && swift build -c release --product obsbench
  /usr/bin/python3 Benchmarks/cluster-timeline.py [--build .build/release] [--seconds 2] [--leader 1|2|3]
"""
import argparse
import bisect
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

# Reads that return data, writes as they start, and each wake-up's wait for a CPU, of obsbench's
# and obsd's threads. `nsecs` is CLOCK_MONOTONIC, as Python's time.monotonic_ns().
PROGRAM = r"""
tracepoint:syscalls:sys_enter_write /comm == "obsd" || comm == "obsbench"/ {
  printf("W %llu %d %d %d %d\n", nsecs, pid, tid, args->fd, args->count); }
tracepoint:syscalls:sys_enter_sendto /comm == "obsd" || comm == "obsbench"/ {
  printf("W %llu %d %d %d %d\n", nsecs, pid, tid, args->fd, args->len); }
tracepoint:syscalls:sys_enter_sendmsg, tracepoint:syscalls:sys_enter_writev
/comm == "obsd" || comm == "obsbench"/ { printf("W %llu %d %d %d -1\n", nsecs, pid, tid, args->fd); }

tracepoint:syscalls:sys_enter_read, tracepoint:syscalls:sys_enter_recvfrom,
tracepoint:syscalls:sys_enter_recvmsg, tracepoint:syscalls:sys_enter_readv
/comm == "obsd" || comm == "obsbench"/ { @fd[tid] = args->fd; }

tracepoint:syscalls:sys_exit_read, tracepoint:syscalls:sys_exit_recvfrom,
tracepoint:syscalls:sys_exit_recvmsg, tracepoint:syscalls:sys_exit_readv
/(comm == "obsd" || comm == "obsbench") && args->ret > 0/ { printf("R %llu %d %d %d %d\n", nsecs, pid, tid, @fd[tid], args->ret); }

tracepoint:sched:sched_wakeup /args->comm == "obsd" || args->comm == "obsbench"/ { @woken[args->pid] = nsecs; }
tracepoint:sched:sched_switch /@woken[args->next_pid]/ {
  printf("Q %llu %d %llu\n", nsecs, args->next_pid, nsecs - @woken[args->next_pid]);
  delete(@woken[args->next_pid]);
}
"""

# An answer or a watch message of etcd's, or a request's frames, carry more than this; PING,
# SETTINGS and WINDOW_UPDATE frames and an eventfd's wake-up less. A size of -1 is not known
# (sendmsg, writev).
MESSAGE_BYTES = 40


def command_line(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return []


def sample_sockets(until, samples):
    """Every quarter second until `until` is set: (time, unix sockets, tcp sockets, processes)."""
    while not until.is_set():
        unix = subprocess.run(["ss", "-xpnH"], capture_output=True, text=True).stdout
        tcp = subprocess.run(["ss", "-tpnH"], capture_output=True, text=True).stdout
        processes = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                arguments = command_line(name)
                if arguments and os.path.basename(arguments[0]) in (b"obsd", b"obsbench", b"etcd"):
                    processes[int(name)] = [a.decode(errors="replace") for a in arguments]
        samples.append((time.monotonic_ns(), unix, tcp, processes))
        until.wait(0.25)


def owners(line):
    return [(int(pid), int(fd)) for pid, fd in re.findall(r"pid=(\d+),fd=(\d+)", line)]


def connections(samples):
    """Who is who: host A's and B's pids, obsbench's descriptors to each host (with the host's
    descriptor), and obsbench's descriptors to etcd's members 1 and 2 (raw etcd's writer and
    watcher)."""
    bench, hosts, members = None, {}, {}
    to_host = {}  # (bench fd) -> (host, host fd)
    raw = {}
    for _, unix, tcp, processes in samples:
        for pid, arguments in processes.items():
            name = os.path.basename(arguments[0])
            if name == "obsbench":
                bench = pid
            elif name == "obsd" and "--socket" in arguments:
                path = arguments[arguments.index("--socket") + 1]
                hosts[pid] = "A" if path.endswith("/h0.sock") else "B"
            elif name == "etcd" and "--name" in arguments:
                url = arguments[arguments.index("--listen-client-urls") + 1]
                members[arguments[arguments.index("--name") + 1]] = url.rsplit(":", 1)[1]
        by_inode = {}
        for line in unix.splitlines():
            fields = line.split()
            if len(fields) >= 8 and fields[1] == "ESTAB":
                for owner in owners(line):
                    by_inode[fields[5]] = (owner, fields[7])
        for inode, ((pid, fd), peer) in by_inode.items():
            if pid == bench and peer in by_inode and by_inode[peer][0][0] in hosts:
                host_pid, host_fd = by_inode[peer][0]
                to_host[fd] = (hosts[host_pid], host_fd)
        for line in tcp.splitlines():
            fields = line.split()
            for pid, fd in owners(line):
                if pid == bench and len(fields) >= 5:
                    port = fields[4].rsplit(":", 1)[1]
                    for name, role in (("m1", "writer"), ("m2", "watcher")):
                        if members.get(name) == port:
                            raw[role] = fd
    pids = {role: pid for pid, role in hosts.items()}
    return bench, pids, to_host, raw


def read_trace(path, bench, pids):
    tids = {}
    events = []
    lost = 0
    for line in open(path):
        fields = line.split()
        if line.startswith("Lost "):
            lost += int(fields[1])  # bpftrace: "Lost N events"
        if not fields or fields[0] not in ("W", "R", "Q") or len(fields) != (4 if fields[0] == "Q" else 6):
            continue
        if fields[0] == "Q":
            events.append(("Q", int(fields[1]), int(fields[2]), 0, int(fields[3])))
        else:
            tids[int(fields[3])] = int(fields[2])
            events.append((fields[0], int(fields[1]), int(fields[2]), int(fields[4]), int(fields[5])))
    names = {bench: "obsbench", pids.get("A"): "A", pids.get("B"): "B"}
    timeline = []
    for kind, at, pid, fd, size in events:
        if kind == "Q":
            pid = tids.get(pid, -1)  # a thread's wait for a CPU, counted for its process
        if pid in names:
            timeline.append((at, names[pid], kind, fd, size))
    timeline.sort()
    return timeline, lost


def waits_between(waits, times, who, start, end):
    """The CPU waits of `who` that ended in (start, end], from the sorted list `waits` and its
    times (`times`)."""
    return sum(e[4] for e in waits[bisect.bisect_right(times, start):bisect.bisect_right(times, end)] if e[1] == who)


def obsd_writes(timeline, to_host):
    """Each `set` obsbench sent host A right after the answer to the one before (one write under
    way, the latency row's writes left out: there obsbench also waits for host B's event),
    cut into its steps (ns)."""
    steps = {}
    waits = [e for e in timeline if e[2] == "Q"]
    times = [e[0] for e in waits]
    events = [e for e in timeline if e[2] != "Q"]
    host = {fd: role for fd, (role, _) in to_host.items()}
    starts = [i for i, (_, who, kind, fd, _) in enumerate(events)
              if who == "obsbench" and kind == "W" and host.get(fd) == "A"]
    for position, start in enumerate(starts):
        at, _, _, bench_fd, _ = events[start]
        host_fd = to_host[bench_fd][1]
        before = next((e for e in reversed(events[max(0, start - 40):start]) if e[1] == "obsbench"), None)
        if not (before and before[2] == "R" and host.get(before[3]) == "A"):
            continue  # not sent right after an answer
        end = starts[position + 1] if position + 1 < len(starts) else len(events)
        window = events[start + 1:end]
        if any(e[1] == "obsbench" and e[2] == "R" and host.get(e[3]) == "B" for e in window):
            continue  # the latency row: obsbench waits for host B's event too

        def first(condition, after):
            return next((e for e in window if e[0] > after and condition(e)), None)

        read = first(lambda e: e[1] == "A" and e[2] == "R" and e[3] == host_fd, at)
        sent = read and first(lambda e: e[1] == "A" and e[2] == "W" and e[3] != host_fd and e[4] > MESSAGE_BYTES, read[0])
        answer = sent and first(lambda e: e[1] == "A" and e[2] == "R" and e[3] != host_fd and e[4] > MESSAGE_BYTES, sent[0])
        answered = answer and first(lambda e: e[1] == "A" and e[2] == "W" and e[3] == host_fd, answer[0])
        taken = answered and first(lambda e: e[1] == "obsbench" and e[2] == "R" and e[3] == bench_fd, answered[0])
        if not taken:
            continue  # the trace lost an event
        for name, value in (("obsbench from an answer to its next `set`", at - before[0]),
                            ("the `set` to host A", read[0] - at), ("host A until its put is sent", sent[0] - read[0]),
                            ("etcd, until host A reads its answer", answer[0] - sent[0]),
                            ("host A from etcd's answer to its own", answered[0] - answer[0]),
                            ("the answer to obsbench", taken[0] - answered[0]),
                            ("a write, from answer to answer", taken[0] - before[0])):
            steps.setdefault(name, []).append(value)
        for who in ("A", "B", "obsbench"):
            steps.setdefault(f"of which waiting for a CPU: {who}", []).append(waits_between(waits, times, who, before[0], taken[0]))
    return steps


def raw_writes(timeline, raw):
    """Each raw put obsbench sent right after the answer to the one before, in steps (ns): every
    row runs one put at a time (`--in-flight 1`)."""
    steps = {}
    writer = raw.get("writer")
    waits = [e for e in timeline if e[2] == "Q"]
    times = [e[0] for e in waits]
    mine = [e for e in timeline if e[1] == "obsbench" and e[2] != "Q"]
    for i, (at, _, kind, fd, size) in enumerate(mine):
        if kind != "W" or fd != writer or i == 0 or 0 <= size <= MESSAGE_BYTES:
            continue  # not a put's first frames (a PING's acknowledgement, a window update)
        before = mine[i - 1]
        if not (before[2] == "R" and before[3] == writer and before[4] > MESSAGE_BYTES):
            continue  # a put's second write, or not sent right after an answer
        answer = next((e for e in mine[i + 1:i + 40] if e[2] == "R" and e[3] == writer and e[4] > MESSAGE_BYTES), None)
        if answer is None:
            continue
        steps.setdefault("obsbench from an answer to its next put", []).append(at - before[0])
        steps.setdefault("etcd, until obsbench reads its answer", []).append(answer[0] - at)
        steps.setdefault("a write, from answer to answer", []).append(answer[0] - before[0])
        steps.setdefault("of which waiting for a CPU: obsbench", []).append(waits_between(waits, times, "obsbench", before[0], answer[0]))
    return steps


def print_steps(title, steps):
    print(f"| {title} | writes | mean (µs) | median (µs) |")
    print("|---|---:|---:|---:|")
    for name, values in steps.items():
        print(f"| {name} | {len(values)} | {statistics.mean(values) / 1000:.1f} | {statistics.median(values) / 1000:.1f} |")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=".build/release", help="where obsbench and obsd are")
    parser.add_argument("--seconds", type=float, default=2)
    parser.add_argument("--leader", choices=["1", "2", "3"], help="the etcd member made leader (obsbench's --leader)")
    options = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("bpftrace"):
        raise SystemExit("needs root and bpftrace (apt-get install --no-upgrade bpftrace)")
    if not os.path.exists("/sys/kernel/tracing/events"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=False)
    directory = tempfile.mkdtemp(prefix="obsd-timeline-")
    tracer, done = None, threading.Event()
    try:
        program, trace = os.path.join(directory, "timeline.bt"), os.path.join(directory, "trace")
        errors = os.path.join(directory, "bpftrace.err")
        open(program, "w").write(PROGRAM)
        with open(trace, "w") as output, open(errors, "w") as error_output:
            tracer = subprocess.Popen(["bpftrace", "-B", "full", program], stdout=output, stderr=error_output)
        deadline = time.time() + 30
        while "Attaching" not in open(trace).read(200):
            if tracer.poll() is not None or time.time() > deadline:
                raise SystemExit("bpftrace did not start:\n" + open(errors).read())
            time.sleep(0.1)
        samples = []
        sampler = threading.Thread(target=sample_sockets, args=(done, samples), daemon=True)
        sampler.start()
        # The latency rows are kept short (10 writes): there each write also waits for the
        # watcher's event, which the steps below leave out; the other rows give the steps.
        benchmark = subprocess.run([os.path.join(options.build, "obsbench"), "cluster", "--raw-watches", "1", "--rounds", "1",
                                    "--in-flight", "1", "--samples", "10", "--seconds", str(options.seconds),
                                    "--obsd", os.path.join(options.build, "obsd")] + (["--leader", options.leader] if options.leader else []),
                                   capture_output=True, text=True)
        done.set()
        sampler.join()
        stop(tracer)
        if benchmark.returncode:
            raise SystemExit(f"obsbench cluster failed:\n{benchmark.stderr}")
        print(benchmark.stdout)
        bench, pids, to_host, raw = connections(samples)
        if bench is None or "A" not in pids or "writer" not in raw:
            raise SystemExit("could not tell the connections apart from ss's samples")
        timeline, lost = read_trace(trace, bench, pids)
        print("### One write at a time, step by step (traced: for the steps' shares, not the ratios)")
        print()
        if lost:
            print(f"bpftrace lost {lost} events: some writes are left out.")
            print()
        print_steps("obsd: a `set` on host A", obsd_writes(timeline, to_host))
        print_steps("raw etcd: a put", raw_writes(timeline, raw))
    finally:
        done.set()
        if tracer is not None:
            stop(tracer)
        shutil.rmtree(directory, ignore_errors=True)


def stop(tracer):
    """Stops bpftrace (SIGINT lets it flush what it holds), killing it if it does not end."""
    if tracer.poll() is None:
        tracer.send_signal(signal.SIGINT)
        try:
            tracer.wait(30)
        except subprocess.TimeoutExpired:
            tracer.kill()
            tracer.wait()

if __name__ == "__main__":
    sys.exit(main())
