"""A throwaway PostgreSQL server with pgvector, for tests and benchmarks.

Debian's PostgreSQL has no pgvector, so the server comes from the ``pgserver`` wheel
(PostgreSQL 16 with pgvector bundled; a dev dependency). It is started from its own binaries
on a free loopback port with its data in a temporary folder, and stopped and removed by
``stop()``. PostgreSQL refuses to run as root, so under root it runs as ``nobody``, from a
copy of the binaries in the temp folder: ``nobody`` may not be able to enter the folder that
holds the virtualenv (a clone in a ``mktemp -d`` folder is mode 700).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from citewise.errors import StoreError


def pgserver_bin() -> Path:
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise StoreError("The pgvector test server needs the pgserver wheel: pip install 'citewise[dev]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def runnable_bin(user: str | None) -> Path:
    """The binaries ``user`` can run: the wheel's own, or for another user a shared copy."""
    source = pgserver_bin()
    if user is None:
        return source
    # the binaries find their libraries at $ORIGIN/../../../pgserver.libs: copy that layout
    package = source.parent.parent
    key = hashlib.sha1(str(package).encode()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"citewise-pgserver-{key}"
    if not (target / "pgserver" / "pginstall" / "bin" / "pg_ctl").exists():
        staging = Path(tempfile.mkdtemp(prefix="citewise-pgserver-", dir=target.parent))
        shutil.copytree(package / "pginstall", staging / "pgserver" / "pginstall", symlinks=True)
        libs = package.parent / "pgserver.libs"
        if libs.is_dir():
            shutil.copytree(libs, staging / "pgserver.libs", symlinks=True)
        for folder in (staging, staging / "pgserver"):
            folder.chmod(0o755)
        try:
            staging.rename(target)
        except OSError:  # another process put its copy there first
            shutil.rmtree(staging, ignore_errors=True)
    return target / "pgserver" / "pginstall" / "bin"


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
    cmd = [str(runnable_bin(user) / args[0]), *args[1:]]
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
