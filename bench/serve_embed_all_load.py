#!/usr/bin/env python3
"""A 64-client load of `bertfit serve`'s /embed_all on a BERT-base-sized embedding model, with
/health probed all along (issue 43; not part of the tests: it measures).

  bench/serve_embed_all_load.py BERTFIT MODEL_DIR [SECONDS]

MODEL_DIR is made when missing: `bertfit init --arch bert` (bert-base: 12 layers, 768 wide,
random weights) plus a sentence-transformers mean Pooling module. For SECONDS (default 60) 64
keep-alive clients run closed loops: 32 send one 512-token input and read its answer (~4.6 MB),
16 send 32 such inputs at once (a ~190 MB answer: refused before the work by
--max-answer-bytes), 16 send one 512-token input and close without reading. One more client
GETs /health every 100 ms. Prints the answers by status, /health's latency (p50, p99, max,
failures) and the server's peak resident memory (VmHWM) with the command, date and CPU.
"""
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time


def make_model(bertfit, folder):
    if os.path.exists(os.path.join(folder, "modules.json")):
        return
    subprocess.run([bertfit, "init", "--arch", "bert", "--output", folder], check=True)
    json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}],
              open(os.path.join(folder, "modules.json"), "w"))
    os.makedirs(os.path.join(folder, "1_Pooling"), exist_ok=True)
    json.dump({"word_embedding_dimension": 768, "pooling_mode_cls_token": False,
               "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False},
              open(os.path.join(folder, "1_Pooling", "config.json"), "w"))


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def main():
    bertfit, folder = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 60
    make_model(bertfit, folder)
    cmd = [bertfit, "serve", "--model", folder, "--port", "0"]
    server = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    port = None
    while port is None:
        line = server.stderr.readline()
        if not line:
            sys.exit("the server exited")
        m = re.search(r"listening on .*:(\d+)", line)
        if m:
            port = int(m.group(1))
    threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()

    one = json.dumps({"inputs": "x " * 510})
    many = json.dumps({"inputs": ["x " * 510] * 32})
    stop = time.time() + seconds
    statuses = {}
    lock = threading.Lock()

    def count(key):
        with lock:
            statuses[key] = statuses.get(key, 0) + 1

    def reader(body):
        while time.time() < stop:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                while time.time() < stop:
                    c.request("POST", "/embed_all", body, {"Content-Type": "application/json"})
                    r = c.getresponse()
                    r.read()
                    count(r.status)
                    if r.status == 429:
                        time.sleep(0.2)
            except Exception as e:  # noqa: BLE001 (a measurement: count and go on)
                count(type(e).__name__)

    def leaver():
        while time.time() < stop:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            c.request("POST", "/embed_all", one, {"Content-Type": "application/json"})
            time.sleep(0.5)
            c.close()
            count("left")

    health = []
    failures = [0]

    def prober():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        while time.time() < stop:
            t = time.time()
            try:
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    failures[0] += 1
                health.append(time.time() - t)
            except Exception:  # noqa: BLE001
                failures[0] += 1
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            time.sleep(0.1)

    threads = [threading.Thread(target=reader, args=(one,)) for _ in range(32)]
    threads += [threading.Thread(target=reader, args=(many,)) for _ in range(16)]
    threads += [threading.Thread(target=leaver) for _ in range(16)]
    threads.append(threading.Thread(target=prober))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    hwm = 0
    for line in open(f"/proc/{server.pid}/status"):
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) // 1024
    metrics = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    metrics.request("GET", "/metrics")
    gone = re.search(r'reason="client_gone",status="none"\} (\d+)', metrics.getresponse().read().decode())
    server.terminate()
    server.wait()
    health.sort()
    pick = lambda q: health[min(len(health) - 1, int(q * len(health)))] * 1000  # noqa: E731
    print(f"command: {' '.join(sys.argv)} (server: {' '.join(cmd)})")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; CPU: {cpu_model()}, "
          f"{os.cpu_count()} cores")
    print(f"answers by status: {dict(sorted(statuses.items(), key=str))}; "
          f"client_gone counted: {gone.group(1) if gone else 0}")
    print(f"/health: {len(health)} probes, p50 {pick(0.5):.1f} ms, p99 {pick(0.99):.1f} ms, "
          f"max {health[-1] * 1000:.1f} ms, failures {failures[0]}")
    print(f"server peak RSS (VmHWM): {hwm} MB")


if __name__ == "__main__":
    main()
