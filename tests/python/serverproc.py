"""Start and stop `qwen3-tts serve` for the Python server tests (loopback only).

    with ServerProcess(bin_path, model_dir, extra_args) as srv:
        srv.port, srv.pid, srv.rss_kib()

The server binds 127.0.0.1 on a free port (--port 0); the port is read from
its "ready on port N" log line. Leaving the block sends SIGTERM and waits for
the drain (the exit code is kept in .exit_code).
"""
import os
import re
import select
import signal
import subprocess
import threading
import time


class ServerProcess:
    def __init__(self, bin_path, model_dir, args=(), ready_timeout=120):
        self.bin_path = bin_path
        self.model_dir = model_dir
        self.args = list(args)
        self.ready_timeout = ready_timeout
        self.proc = None
        self.port = None
        self.exit_code = None
        self.log = []
        self._reader = None

    def __enter__(self):
        cmd = [self.bin_path, "serve", "-m", self.model_dir, "--host", "127.0.0.1", "--port", "0"] + self.args
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + self.ready_timeout
        buf = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stderr], [], [], 0.2)
            if r:
                chunk = os.read(self.proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
                m = re.search(rb"ready on port (\d+)\n", buf)
                if m:
                    self.port = int(m.group(1))
                    self.log.append(buf.decode("utf-8", "replace"))
                    self._reader = threading.Thread(target=self._drain_stderr, daemon=True)
                    self._reader.start()
                    return self
            if self.proc.poll() is not None:
                break
        self.proc.kill()
        self.proc.wait()
        raise RuntimeError("server did not become ready: " + buf.decode("utf-8", "replace"))

    def _drain_stderr(self):
        while True:
            chunk = self.proc.stderr.read1(4096) if hasattr(self.proc.stderr, "read1") else self.proc.stderr.read(4096)
            if not chunk:
                return
            self.log.append(chunk.decode("utf-8", "replace"))

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.exit_code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.exit_code = self.proc.wait()
        else:
            self.exit_code = self.proc.returncode
        if self._reader:
            self._reader.join(5)
        return self.exit_code

    def __exit__(self, *exc):
        self.stop()
        return False
