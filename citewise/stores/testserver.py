"""A throwaway PostgreSQL server with pgvector, for tests and benchmarks.

Debian's PostgreSQL has no pgvector, so the server comes from the ``pgserver`` wheel
(PostgreSQL 16 with pgvector bundled; a dev dependency). It is started from its own binaries
on a free loopback port with its data in a temporary folder, and stopped and removed by
``stop()``. PostgreSQL refuses to run as root, so under root it runs as ``nobody``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import StoreError


def pgserver_bin() -> Path:
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise StoreError("The pgvector test server needs the pgserver wheel: pip install 'citewise[dev]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgTestServer:
    datadir: Path
    port: int
    user: str | None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        _run(["pg_ctl", "-D", str(self.datadir), "-m", "immediate", "-w", "stop"], self.user,
             check=False)
        shutil.rmtree(self.datadir, ignore_errors=True)


def _run(args: list[str], user: str | None, check: bool = True) -> None:
    cmd = [str(pgserver_bin() / args[0]), *args[1:]]
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    done = subprocess.run(cmd, user=user, env=env, capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise StoreError(f"{args[0]} failed: {done.stderr.strip() or done.stdout.strip()}")


def start_pgvector(port: int | None = None) -> PgTestServer:
    """initdb a temporary cluster (trust auth, loopback only) and start it; returns its handle."""
    user = "nobody" if os.geteuid() == 0 else None
    datadir = Path(tempfile.mkdtemp(prefix="citewise-pg-"))
    if user:
        shutil.chown(datadir, user)
    server = PgTestServer(datadir, port or free_port(), user)
    try:
        _run(["initdb", "-D", str(datadir), "-U", "postgres", "--auth=trust",
              "--encoding=UTF8", "--locale=C"], user)
        options = f"-h 127.0.0.1 -p {server.port} -k {datadir} -c max_connections=200"
        _run(["pg_ctl", "-D", str(datadir), "-o", options, "-l", str(datadir / "log"),
              "-w", "-t", "60", "start"], user)
    except BaseException:
        server.stop()
        raise
    return server
