"""The ``rate_windows`` table (migration m008): one row per API key, its ``booked_until`` in
microseconds (``citewise/ratelimit.py`` says what the number means).

Each request reads, decides and writes its key's row in one transaction that holds the row:
SQLite's write lock (``BEGIN IMMEDIATE``, one writer per file at a time), or on MySQL and
PostgreSQL the row lock of ``SELECT ... FOR UPDATE`` after an insert that makes sure the row
exists. So two processes, or two connections of one, can never both pass on the last token.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..ratelimit import Decision, admit, wall_us

# the row of a key never seen before, without touching an existing one's number
_CLAIM = {
    "mysql": "INSERT INTO rate_windows (name, booked_until) VALUES (%s, 0) "
             "ON DUPLICATE KEY UPDATE booked_until = booked_until",
    "postgres": "INSERT INTO rate_windows (name, booked_until) VALUES (%s, 0) "
                "ON CONFLICT (name) DO NOTHING",
}


def take(store: Any, name: str, rate_per_minute: int, now: int | None = None) -> Decision:
    """One request of key ``name``, decided by ``admit`` and stored if it passed; at ``now``, or
    when not given at this machine's time once the row is held."""
    from .server import ServerStore
    from .sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        with store.transaction() as db:
            row = db.execute("SELECT booked_until FROM rate_windows WHERE name = ?",
                             (name,)).fetchone()
            decision = admit(row[0] if row else 0, wall_us() if now is None else now,
                             rate_per_minute)
            if not decision.retry_after:
                db.execute("INSERT INTO rate_windows (name, booked_until) VALUES (?, ?) "
                           "ON CONFLICT (name) DO UPDATE SET booked_until = excluded.booked_until",
                           (name, decision.booked_until))
        return decision
    if isinstance(store, ServerStore):
        with store.transaction() as cur:
            cur.execute(_CLAIM[store.backend], (name,))
            cur.execute("SELECT booked_until FROM rate_windows WHERE name = %s FOR UPDATE", (name,))
            booked = int(cur.fetchone()[0])
            decision = admit(booked, wall_us() if now is None else now, rate_per_minute)
            if not decision.retry_after:
                cur.execute("UPDATE rate_windows SET booked_until = %s WHERE name = %s",
                            (decision.booked_until, name))
        return decision
    raise ConfigError(f"Rate limits are not kept in {type(store).__name__}; set CITEWISE_REDIS_URL")
