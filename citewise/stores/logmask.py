"""No log line carries a password: ``mask_log_lines()`` makes every log record, whoever logs it
(citewise, uvicorn, a driver, the MCP SDK), hold its message and its traceback with the
password of each URL in them replaced by ``***`` (``stores.urls.mask``). It changes how records
are made (``logging.setLogRecordFactory``), so it holds whatever handlers a process sets up;
the HTTP service (``api/app.py``) and the console install it.
"""

from __future__ import annotations

import logging
from typing import Any

from citewise.stores.urls import mask

_formatter = logging.Formatter()


class _Masking:
    """A log record factory around another: the records it makes are masked."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.inner(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format is logging's own error to report
            return record
        if "://" in message:
            record.msg, record.args = mask(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = mask(_formatter.formatException(record.exc_info))
        return record


def mask_log_lines() -> None:
    """Mask every log record made from now on in this process (once; calling again is harmless)."""
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _Masking):
        logging.setLogRecordFactory(_Masking(factory))
