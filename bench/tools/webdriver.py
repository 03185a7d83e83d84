"""A minimal WebDriver client (Python standard library only) for Debian's
chromium through chromedriver: start the driver, open a headless browser,
load pages, run scripts, quit. Used by bench/serve_scale.py to time what a
user waits for in a real browser."""
import json
import socket
import subprocess
import tempfile
import time
import urllib.request

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """A headless chromium session; use as a context manager."""

    def __init__(self, width: int = 1400, height: int = 1000):
        self.port = free_port()
        self.driver = subprocess.Popen(
            [CHROMEDRIVER, f"--port={self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.profile = tempfile.TemporaryDirectory(prefix="bench-chromium-")
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("chromedriver did not start")
                time.sleep(0.05)
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", f"--user-data-dir={self.profile.name}"]
        caps = {"capabilities": {"alwaysMatch": {
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.loads(response.read() or b"null")["value"]

    def goto(self, url: str):
        self._call("POST", f"/session/{self.session}/url", {"url": url})

    def run(self, script: str, *args):
        """The value of `script` (a function body: use `return`)."""
        return self._call("POST", f"/session/{self.session}/execute/sync",
                          {"script": script, "args": list(args)})

    def wait(self, expression: str, timeout: float = 60):
        """Poll until `expression` is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.run(f"return ({expression});")
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(expression)
            time.sleep(0.02)

    def screenshot(self, path: str):
        """Save a PNG of the window."""
        import base64
        png = self._call("GET", f"/session/{self.session}/screenshot")
        with open(path, "wb") as f:
            f.write(base64.b64decode(png))

    def close(self):
        try:
            self._call("DELETE", f"/session/{self.session}")
        finally:
            self.driver.kill()
            self.driver.wait()
            self.profile.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
