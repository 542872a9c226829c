"""fconv-serve run as a user runs it: a subprocess on 127.0.0.1, serving a model."""

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request

from tests.support import free_port
from tests import warm_commands


class Server:
    def __init__(self, data_bin, checkpoint, *options, log_path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            [str(warm_commands.bin_dir() / "fconv-serve"), str(data_bin), "--path", str(checkpoint), "--port", str(self.port), *map(str, options)],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"fconv-serve exited ({self.process.returncode}):\n{open(log_path).read()[-3000:]}")
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("fconv-serve did not answer /health in 120 s")
            time.sleep(0.2)

    def request(self, path, body: bytes = None, timeout: float = 60):
        """(status, decoded JSON answer)."""
        request = urllib.request.Request(self.url + path, data=body, method="GET" if body is None else "POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def get(self, path):
        return self.request(path)

    def translate(self, **request):
        return self.request("/translate", json.dumps(request).encode())

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()
