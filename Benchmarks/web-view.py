#!/usr/bin/python3
"""How the live view of `obsctl web` holds up while keys change fast: a benchmark, not a test.

For each configuration it starts obsd (--memory) on a private socket, sets KEYS keys, starts
`obsctl web --listen 127.0.0.1:0`, opens the page in headless Chromium (Debian's chromium,
chromium-driver and python3-selenium, as the tests use), and then sets every key RATE times a
second for SECONDS (one `batch` of KEYS sets per round, pipelined, from this process). It prints
one row per configuration:

  changes/s   the sets the daemon acknowledged per second
  fps         animation frames the page ran per second while the load ran (60 is every frame)
  p99, max    the 99th percentile and the longest gap between frames, in ms (a frozen tab shows
              here first)
  catch-up    from the daemon's answer to the last batch to the page showing its value, in ms

  /usr/bin/python3 Benchmarks/web-view.py           # release builds: swift build -c release first
  /usr/bin/python3 Benchmarks/web-view.py --build .build/debug --seconds 3 100x100 1000x100
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Browser"))
import driver  # noqa: E402  (the tests' Chromium setup)

FRAME_MONITOR = """
window.frameGaps = [];
let last = performance.now();
const tick = now => { window.frameGaps.push(now - last); last = now; requestAnimationFrame(tick); };
requestAnimationFrame(tick);
"""


def connect(path):
    for _ in range(200):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            return s
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("obsd did not start")


def batch(keys, value):
    ops = [{"op": "set", "key": "load.k%05d" % i, "value": value} for i in range(keys)]
    return (json.dumps({"op": "batch", "ops": ops}) + "\n").encode()


class Load:
    """Sends a batch of KEYS sets RATE times a second; notes when the daemon answers each."""

    def __init__(self, path, keys, rate, seconds):
        self.path, self.keys, self.rate, self.seconds = path, keys, rate, seconds
        self.answered = 0
        self.last_answer = None

    def run(self):
        s = connect(self.path)
        reader = s.makefile("rb")
        self.sent = 0

        def read():
            for _ in reader:
                self.answered += 1
                self.last_answer = time.time()
        thread = threading.Thread(target=read)
        thread.start()
        start = time.monotonic()
        while time.monotonic() - start < self.seconds:
            s.sendall(batch(self.keys, self.sent))
            self.sent += 1
            pause = start + self.sent / self.rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        while self.answered < self.sent:
            time.sleep(0.001)
        self.elapsed = time.monotonic() - start
        s.shutdown(socket.SHUT_RDWR)
        thread.join()
        s.close()


def measure(build, keys, rate, seconds):
    root = tempfile.mkdtemp(prefix="obsctl-web-bench-")
    path = os.path.join(root, "obsd.sock")
    daemon = subprocess.Popen([os.path.join(build, "obsd"), "--socket", path, "--memory"], stderr=subprocess.DEVNULL)
    web = browser = None
    try:
        s = connect(path)
        s.sendall(batch(keys, -1))
        s.makefile("rb").readline()
        s.close()
        web = subprocess.Popen([os.path.join(build, "obsctl"), "--socket", path, "web", "--listen", "127.0.0.1:0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        url = web.stdout.readline().strip()
        browser = driver.start()
        browser.get(url)
        ready = "return document.body.dataset.connection === 'live' && document.querySelectorAll('#rows .row').length === %d" % keys
        while not browser.execute_script(ready):
            time.sleep(0.05)
        browser.execute_script(FRAME_MONITOR)
        load = Load(path, keys, rate, seconds)
        load.run()
        gaps = browser.execute_script("const g = window.frameGaps.slice(1); window.frameGaps = []; return g;")
        shows = "return document.querySelector('#rows .row[data-key=\"load.k00000\"]').children[2].textContent === '%d'" % (load.sent - 1)
        while not browser.execute_script(shows):
            time.sleep(0.005)
        caught_up = time.time()
        gaps.sort()
        return {
            "changes/s": round(load.answered * keys / load.elapsed),
            "fps": round(len(gaps) / load.elapsed, 1),
            "p99": round(gaps[int(len(gaps) * 0.99)]) if gaps else None,
            "max": round(gaps[-1]) if gaps else None,
            "catch-up": round((caught_up - load.last_answer) * 1000),
        }
    finally:
        if browser:
            browser.quit()
        for process in (web, daemon):
            if process:
                process.terminate()
                process.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=".build/release", help="where obsd and obsctl are (default .build/release)")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("configurations", nargs="*", default=["100x100", "1000x10", "1000x100"],
                        help="KEYSxRATE: KEYS keys, each set RATE times a second")
    arguments = parser.parse_args()
    columns = ["keys", "rate", "changes/s", "fps", "p99", "max", "catch-up"]
    print(" ".join("%10s" % c for c in columns))
    for configuration in arguments.configurations:
        keys, rate = (int(part) for part in configuration.split("x"))
        row = {"keys": keys, "rate": rate, **measure(arguments.build, keys, rate, arguments.seconds)}
        print(" ".join("%10s" % row[c] for c in columns), flush=True)


if __name__ == "__main__":
    main()
