"""The ``rate_windows`` table (migration m008): one row per API key, its ``booked_until`` in
microseconds (``citewise/ratelimit.py`` says what the number means).

Each request reads, decides and writes its key's row in one transaction that holds the row:
an insert makes sure the row exists without touching an existing one's number (the dialect's
``claim_rate``), then the read holds it (``SELECT ... FOR UPDATE`` on MySQL and PostgreSQL;
on SQLite the transaction's write lock holds the whole file). So two processes, or two
connections of one, can never both pass on the last token.
"""

from __future__ import annotations

from citewise.ratelimit import Decision, admit, wall_us
from citewise.stores.database import Database


def take(db: Database, name: str, rate_per_minute: int, now: int | None = None) -> Decision:
    """One request of key ``name``, decided by ``admit`` and stored if it passed; at ``now``, or
    when not given at this machine's time once the row is held."""
    with db.transaction() as cur:
        cur.execute(db.dialect.claim_rate, (name,))
        cur.execute(f"SELECT booked_until FROM rate_windows WHERE name = %s{db.dialect.lock}", (name,))
        booked = int(cur.fetchone()[0])
        decision = admit(booked, wall_us() if now is None else now, rate_per_minute)
        if not decision.retry_after:
            cur.execute("UPDATE rate_windows SET booked_until = %s WHERE name = %s",
                        (decision.booked_until, name))
    return decision
