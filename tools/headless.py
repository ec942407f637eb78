"""Debian's headless Chromium driven over its DevTools protocol with the standard library alone (a page that keeps
working after it loads, as Model Explorer does, cannot be read with --dump-dom): open an address, wait until an
expression holds, read an expression's value, take a screenshot. Used by tools/explorer_split.py and
tests/test_explorer.py.

    with Browser() as b:
        b.open("http://127.0.0.1:8080/")
        b.wait("document.querySelector('canvas') !== null", 30)
        b.shot("x.png")
"""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request

CHROMIUM = shutil.which("chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    def __init__(self, size=(1600, 900)):
        self.port, self.profile = free_port(), tempfile.mkdtemp(prefix="headless-")
        self.size = size
        self.proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--enable-unsafe-swiftshader",
                                      "--no-first-run", f"--user-data-dir={self.profile}",
                                      f"--window-size={size[0]},{size[1]}", f"--remote-debugging-port={self.port}",
                                      "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.sock, self.n = None, 0

    def __enter__(self):
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json", timeout=2) as r:
                    pages = [p for p in json.load(r) if p.get("type") == "page"]
                if pages:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("chromium did not start")
            time.sleep(0.2)
        self._connect(pages[0]["webSocketDebuggerUrl"])
        # the page's viewport exactly `size` (a headless window's own frame takes some of it)
        self.call("Emulation.setDeviceMetricsOverride", width=self.size[0], height=self.size[1], deviceScaleFactor=1,
                  mobile=False)
        return self

    def __exit__(self, *exc):
        if self.sock is not None:
            self.sock.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _connect(self, url: str):
        host, _, path = url[len("ws://"):].partition("/")
        name, port = host.split(":")
        self.sock = socket.create_connection((name, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"no websocket: {head[:80]!r}")

    def _send(self, text: str):
        data, mask = text.encode(), os.urandom(4)
        n = len(data)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n)
                                if n < 65536 else bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise RuntimeError("chromium closed the connection")
            out += chunk
        return out

    def _receive(self) -> str:
        parts = []
        while True:
            first, second = self._exact(2)
            n = second & 0x7F
            n = struct.unpack(">H", self._exact(2))[0] if n == 126 else \
                struct.unpack(">Q", self._exact(8))[0] if n == 127 else n
            parts.append(self._exact(n))
            if first & 0x80:
                return b"".join(parts).decode("utf-8", "replace")

    def call(self, method: str, **params):
        self.n += 1
        self._send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            message = json.loads(self._receive())
            if message.get("id") == self.n:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def open(self, url: str):
        self.call("Page.navigate", url=url)

    def value(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    def wait(self, expression: str, seconds: float) -> bool:
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.value(f"(() => {{ try {{ return !!({expression}); }} catch (e) {{ return false; }} }})()"):
                return True
            time.sleep(0.5)
        return False

    def shot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))


if __name__ == "__main__":
    import argparse
    import sys
    argparse.ArgumentParser(description="A helper module, not a command: tools/explorer_split.py and "
                            "tests/test_explorer.py drive Chromium through its Browser.").parse_args()
    print("tools/headless.py is imported, not run: run tools/explorer_split.py", file=sys.stderr)
    sys.exit(2)
