"""Per-key request rates, counted where every server process of one store sees the same count.

A key's allowance is a token bucket: ``rate`` requests at once, then one more every ``60/rate``
seconds. It is kept as one number per key (the generic cell rate algorithm): ``booked_until``,
the moment the bucket is full again, in whole microseconds since the epoch. A request passes
when the bucket holds a token, that is when ``booked_until`` lies at most ``60 s - 60/rate``
ahead, and books one interval more; otherwise ``RateLimitError`` says how many seconds until a
token is back (HTTP 429 with ``Retry-After``). ``admit`` is that rule, written once.

Where the numbers live: ``RateWindows``, one protocol with two implementations, chosen by the
settings (``open_limiter``):

- ``RedisWindows`` when ``CITEWISE_REDIS_URL`` is set: one Lua script reads, decides and writes
  the key's number inside Redis (the script mirrors ``admit``); the Redis key expires when its
  bucket is full.
- ``StoreWindows`` otherwise: the ``rate_windows`` table of the store (migration m008), read and
  written in one transaction that holds the key's row (``stores/rate_rows.py``).

Either way two processes can never both take a key's last token, and the time of a request is
read inside that atomic step (Redis: its own clock; the store: the process's clock once the row
is held), so decisions never go back in time: every store-counting host needs a synchronised
clock (NTP), as a skew of s seconds gives or takes s seconds of refill. If Redis fails (down, too
slow, refusing), the service neither stops answering nor stops limiting: the counts go to the
store, a warning is logged once, and Redis is tried again ``REDIS_RETRY_SECONDS`` later. The
two counts are apart, so around an outage a key may get up to one more minute's allowance.

``RateLimiter`` puts a local pre-check in front: what this process last learned of a key's
number is a lower bound of the shared one (which only moves forward), so a key already over its
rate by that bound is refused with no round trip: a flood of refused requests costs nothing
(read against this machine's clock, so a skew from Redis's clock may refuse that much early).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from citewise.errors import ConfigError, RateLimitError
from citewise.stores.urls import redact

log = logging.getLogger(__name__)

PERIOD_US = 60_000_000  # rates are per minute
REDIS_RETRY_SECONDS = 5.0
REDIS_TIMEOUT_SECONDS = 1.0
KNOWN_MAX = 10_000  # keys remembered by the pre-check before the ones with full buckets go


@dataclass(frozen=True)
class Decision:
    booked_until: int  # the key's number after this request (unchanged when refused)
    retry_after: int  # whole seconds until a token is back; 0 when the request passed


def interval_us(rate_per_minute: int) -> int:
    """Whole microseconds between tokens, rounded down so that a full bucket holds the rate."""
    return max(1, PERIOD_US // rate_per_minute)


def admit(booked_until: int, now: int, rate_per_minute: int) -> Decision:
    """One request of a key whose bucket is full again at ``booked_until`` (0: never used)."""
    interval = interval_us(rate_per_minute)
    start = max(booked_until, now)
    over = start - now - (PERIOD_US - interval)
    if over > 0:
        return Decision(booked_until, max(1, -(-over // 1_000_000)))
    return Decision(start + interval, 0)


class RateWindows(Protocol):
    """Where the keys' numbers are kept, shared by every process that uses the same one."""

    def take(self, name: str, rate_per_minute: int, now: int | None = None) -> Decision:
        """Apply ``admit`` to the key's number atomically: store the new number if the request
        passed, leave it as it was if not. ``now`` (microseconds) is read inside the atomic
        step when not given, so that the order of the times is the order of the decisions:
        a time read before waiting for another process's step would count as an earlier
        request, and a key could be refused before its rate was used up."""
        ...


class StoreWindows:
    """The ``rate_windows`` table of the store that ``store()`` opens (one per thread)."""

    def __init__(self, store: Callable[[], Any]) -> None:
        self.store = store

    def take(self, name: str, rate_per_minute: int, now: int | None = None) -> Decision:
        return self.store().take_rate(name, rate_per_minute, now)


# KEYS[1]: the key's number; ARGV: now (-1: Redis's own clock), interval, period (microseconds).
# Mirrors ``admit``; answers the number, 1 if the request passed, and the time it was taken at.
_TAKE = """
local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local interval = tonumber(ARGV[2])
local start = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now)
if start - now > tonumber(ARGV[3]) - interval then
  return {string.format('%d', start), 0, string.format('%d', now)}
end
local after = start + interval
redis.call('SET', KEYS[1], string.format('%d', after), 'PX', math.ceil((after - now) / 1000))
return {string.format('%d', after), 1, string.format('%d', now)}
"""


class RedisWindows:
    """The numbers in Redis under ``{prefix}rate:{name}``; ``fallback`` counts while Redis fails."""

    def __init__(self, url: str, prefix: str, fallback: RateWindows,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise ConfigError("CITEWISE_REDIS_URL needs the redis package: "
                              "pip install 'citewise[serve]'") from None
        try:
            self.client = redis.Redis.from_url(
                url, socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
                socket_timeout=REDIS_TIMEOUT_SECONDS,
                # once more at once (a pooled connection from before a Redis restart), not the
                # client's default ten times with backoff: a request waits at most ~2 timeouts
                retry=Retry(NoBackoff(), 1))
        except ValueError as e:
            raise ConfigError(f"CITEWISE_REDIS_URL {redact(url)!r}: {e}") from None
        self.url, self.prefix, self.fallback = redact(url), prefix, fallback
        self._script = self.client.register_script(_TAKE)
        self._errors: tuple[type[Exception], ...] = (redis.RedisError,)
        self._monotonic = monotonic
        self._down_until = 0.0  # while Redis is taken as down: until this monotonic time
        self._lock = threading.Lock()

    def take(self, name: str, rate_per_minute: int, now: int | None = None) -> Decision:
        if self._down_until and self._monotonic() < self._down_until:
            return self.fallback.take(name, rate_per_minute, now)
        try:
            booked, passed, at = self._script(
                keys=[f"{self.prefix}rate:{name}"],
                args=[-1 if now is None else now, interval_us(rate_per_minute), PERIOD_US])
        except self._errors as e:
            with self._lock:
                if not self._down_until:
                    log.warning("Redis at %s failed (%s): rate limits are counted in the store "
                                "until it answers again (tried every %.0f s)",
                                self.url, e, REDIS_RETRY_SECONDS)
                self._down_until = self._monotonic() + REDIS_RETRY_SECONDS
            return self.fallback.take(name, rate_per_minute, now)
        if self._down_until:
            with self._lock:
                if self._down_until:
                    log.warning("Redis at %s answers again: rate limits are counted there", self.url)
                    self._down_until = 0.0
        if int(passed):
            return Decision(int(booked), 0)
        return admit(int(booked), int(at), rate_per_minute)

    def close(self) -> None:
        self.client.close()


def wall_us() -> int:
    """Microseconds since the epoch by this machine's clock."""
    return time.time_ns() // 1000


class RateLimiter:
    """``check(name, rate)`` for every request of a key: the shared windows behind a local
    pre-check. Time is the windows' own (read inside their atomic step), or ``clock`` (seconds
    since the epoch) when given, as tests do."""

    def __init__(self, windows: RateWindows, clock: Callable[[], float] | None = None) -> None:
        self.windows = windows
        self._clock = clock
        self._known: dict[str, int] = {}
        self._lock = threading.Lock()

    def check(self, name: str, rate_per_minute: int) -> None:
        """Count one request of key ``name``, or raise ``RateLimitError`` with the wait."""
        now = None if self._clock is None else round(self._clock() * 1_000_000)
        here = wall_us() if now is None else now
        known = self._known.get(name)
        if known is not None and (early := admit(known, here, rate_per_minute)).retry_after:
            raise RateLimitError(early.retry_after)
        decision = self.windows.take(name, rate_per_minute, now)
        with self._lock:
            if len(self._known) >= KNOWN_MAX:
                self._known = {k: v for k, v in self._known.items() if v > here}
                if len(self._known) >= KNOWN_MAX:  # that many keys busy at once: start afresh
                    self._known.clear()
            if decision.booked_until > self._known.get(name, 0):
                self._known[name] = decision.booked_until
        if decision.retry_after:
            raise RateLimitError(decision.retry_after)

    def close(self) -> None:
        close = getattr(self.windows, "close", None)
        if close is not None:
            close()


def open_limiter(store: Callable[[], Any], redis_url: str | None = None,
                 redis_prefix: str = "citewise:") -> RateLimiter:
    """Redis when a URL is given, else the store's ``rate_windows`` table."""
    windows: RateWindows = StoreWindows(store)
    if redis_url:
        windows = RedisWindows(redis_url, redis_prefix, fallback=windows)
    return RateLimiter(windows)
