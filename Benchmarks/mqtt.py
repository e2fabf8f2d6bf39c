#!/usr/bin/env python3
"""locationd-mqtt against a local mosquitto (docs/benchmarks.md, "MQTT bridge").

Usage: Benchmarks/mqtt.py BIN_DIR [--messages N] [--seconds S]

BIN_DIR holds locationd and locationd-mqtt (a release build); locationctl (any build) makes
the demo log. Three numbers:
  throughput  messages/s from the bridge's first to its Nth message at `mosquitto_sub`, locationd
              replaying the demo trip in a loop as fast as it can (every message durable: numbered
              in locationd's SQLite queue, published at QoS 1, acknowledged after the PUBACK)
  idle RSS    the bridge's VmRSS 3 s after it connected to both, nothing to publish
  CPU/hour    the bridge's utime+stime over S seconds of a 1 Hz replay, scaled to an hour
"""
import os, shutil, socket, subprocess, sys, tempfile, threading, time

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port

def wait_for(what, condition, timeout=30):
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline: sys.exit(f"mqtt.py: timed out waiting for {what}")
        time.sleep(0.01)

def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1]) / 1024

class Counter:
    """mosquitto_sub -v on the topic: counts messages as they arrive, with the time of each."""
    def __init__(self, port, topic):
        self.times = []
        self.proc = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-q", "1", "-t", topic + "/#", "-t", topic],
                                     stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self.read, daemon=True).start()
    def read(self):
        for _ in self.proc.stdout: self.times.append(time.monotonic())

def main():
    args = sys.argv[1:]
    if not args: sys.exit(__doc__)
    bin_dir = os.path.abspath(args[0])
    messages = int(args[args.index("--messages") + 1]) if "--messages" in args else 5000
    seconds = float(args[args.index("--seconds") + 1]) if "--seconds" in args else 60
    ctl = shutil.which("locationctl", path=f"{bin_dir}:.build/debug:{os.environ.get('PATH', '')}")
    work = tempfile.mkdtemp(prefix="mq-bench-")
    children = []
    def start(argv, **kw):
        p = subprocess.Popen(argv, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, **kw); children.append(p); return p
    def stop(p):
        p.kill(); p.wait()
    try:
        log = f"{work}/demo.nmea"
        subprocess.run([ctl, "simulate", "demo", "-o", log], check=True)
        port = free_port()
        with open(f"{work}/mosquitto.conf", "w") as f: f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
        start(["mosquitto", "-c", f"{work}/mosquitto.conf"])
        wait_for("mosquitto", lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0)
        topic = "owntracks/bench/device"
        sock = f"{work}/ld.sock"
        bridge_argv = [f"{bin_dir}/locationd-mqtt", "--config", "/dev/null", "--socket", sock, "--broker", f"127.0.0.1:{port}",
                       "--topic", topic, "--status-file", f"{work}/status.json"]

        # Throughput.
        counter = Counter(port, topic)
        def probed():  # mosquitto_sub has subscribed once a probe comes back
            subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-t", topic + "/probe", "-m", "{}"])
            return len(counter.times) > 0
        wait_for("mosquitto_sub", probed)
        time.sleep(0.2)
        counter.times.clear()
        daemon = start([f"{bin_dir}/locationd", "--socket", sock, "--database", f"{work}/ld.db", "--replay", log, "--loop", "--speed", "0"])
        bridge = start(bridge_argv)
        wait_for(f"{messages} messages", lambda: len(counter.times) >= messages, timeout=600)
        span = counter.times[messages - 1] - counter.times[0]
        print(f"throughput: {messages - 1} messages in {span:.2f} s = {(messages - 1) / span:.0f} messages/s "
              f"(bridge CPU {cpu_seconds(bridge.pid):.2f} s)")
        stop(bridge); stop(daemon); counter.proc.kill()

        # Idle RSS: connected to an idle locationd (gpsd absent) and to the broker.
        daemon = start([f"{bin_dir}/locationd", "--socket", sock, "--database", f"{work}/idle.db", "--gpsd", "127.0.0.1:1"])
        wait_for("locationd's socket", lambda: os.path.exists(sock))
        bridge = start(bridge_argv)
        wait_for("the bridge connected", lambda: '"broker":"connected","locationd":"connected"' in (open(f"{work}/status.json").read() if os.path.exists(f"{work}/status.json") else ""))
        time.sleep(3)
        print(f"idle RSS: {rss_mib(bridge.pid):.1f} MiB")
        stop(bridge); stop(daemon)
        os.remove(f"{work}/status.json")

        # CPU per hour at 1 Hz.
        daemon = start([f"{bin_dir}/locationd", "--socket", sock, "--database", f"{work}/hz.db", "--replay", log, "--speed", "1"])
        bridge = start(bridge_argv)
        wait_for("the bridge connected", lambda: os.path.exists(f"{work}/status.json") and '"locationd":"connected"' in open(f"{work}/status.json").read())
        before, t0 = cpu_seconds(bridge.pid), time.monotonic()
        time.sleep(seconds)
        used, elapsed = cpu_seconds(bridge.pid) - before, time.monotonic() - t0
        print(f"CPU at 1 Hz: {used:.2f} s in {elapsed:.0f} s = {used * 3600 / elapsed:.1f} s per hour")
    finally:
        for p in children:
            if p.poll() is None: p.kill(); p.wait()
        shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
