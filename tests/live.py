"""A live uvicorn server in a thread on 127.0.0.1 (a free port), and headless Chromium driven
by Selenium with Debian's chromium and chromium-driver: no browser is ever downloaded."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from tests.envcheck import unavailable

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1100,820"]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run an ASGI app on 127.0.0.1 until the block ends; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                          lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def need_chromium() -> None:
    if os.path.exists(CHROMIUM) and shutil.which(CHROMEDRIVER):
        return
    unavailable("headless Chromium (`make browser` installs Debian's chromium and chromium-driver)")


# no host resolves but this machine's: a page that needs the network shows it by failing
OFFLINE = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"]


@contextmanager
def chromium(flags: list[str] | None = None, log_requests: bool = False) -> Iterator[Any]:
    """Headless Chromium; ``flags`` added to ``FLAGS`` (``OFFLINE``: no network); with
    ``log_requests`` the browser's performance log (``requested(driver)``) is kept, and its
    console at every level (``console(driver)``)."""
    need_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + (flags or []):
        options.add_argument(flag)
    if log_requests:
        options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def requested(driver: Any, attempted: bool = False) -> list[str]:
    """Every URL the browser asked the network for since the last call (needs
    ``log_requests``); a request its page's Content-Security-Policy blocked was never sent, and
    is left out unless ``attempted`` (a page that tries one still logs an error for it)."""
    import json

    urls, blocked = {}, set()
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message["params"]
        if message["method"] == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif message["method"] == "Network.loadingFailed" and params.get("blockedReason") == "csp":
            blocked.add(params["requestId"])
    return [url for request, url in urls.items() if attempted or request not in blocked]


def console(driver: Any) -> list[dict[str, Any]]:
    """What the pages wrote to the browser's console since the last call, each entry with its
    ``level`` (``SEVERE`` for an error, a refused load among them) and ``message``."""
    return list(driver.get_log("browser"))


def screenshot(driver: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    driver.save_screenshot(str(path))
    return path


def stop(proc: subprocess.Popen[Any], grace: float = 10) -> None:
    """Ask a server process to stop; kill it if it has not within ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(grace)


@contextmanager
def server_process(command: list[str], workdir: Path, env: dict[str, str], label: str,
                   start_timeout: float = 60, request_timeout: float = 30) -> Iterator[httpx.Client]:
    """``command`` (a server listening on 127.0.0.1 at the ``{port}`` it is given) in a process
    of its own, its output in ``workdir``; a client once ``/readyz`` answers 200."""
    port = free_port()
    log = (workdir / f"{label}-{port}.log").open("w")
    proc = subprocess.Popen([part.format(port=port) for part in command], cwd=workdir, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=request_timeout)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{label} exited: {Path(log.name).read_text()}")
            try:
                if client.get("/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{label} not ready after {start_timeout:.0f}s")
            time.sleep(0.2)
        yield client
    finally:
        client.close()
        stop(proc)
        log.close()
