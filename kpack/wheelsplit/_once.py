"""Each warning of a split once, with a count: writing the host, device and variant wheels
of one input repeats the same checks per output wheel (30 outputs gave 30 identical lines).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["warnings_once"]

_Key = tuple[str, int, str]  # (logger name, level, message)


class _Collect(logging.Filter):
    """Holds back warnings (and worse) and counts them; lets the rest through."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: collections.Counter[_Key] = collections.Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        self.seen[(record.name, record.levelno, record.getMessage())] += 1
        return False


@contextmanager
def warnings_once(prefix: str = "kpack") -> Iterator[None]:
    """While the block runs, the warnings of the ``prefix`` loggers are held back; after
    it (also on an error), each distinct one is logged once, by its own logger, with
    ``(N times)`` when it came more than once. Messages keep their first-seen order."""
    loggers = [logging.getLogger(prefix)] + [
        logging.getLogger(name)
        for name in sorted(logging.Logger.manager.loggerDict)
        if name.startswith(prefix + ".")
    ]
    collect = _Collect()
    for logger in loggers:
        logger.addFilter(collect)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(collect)
        for (name, level, message), count in collect.seen.items():
            suffix = f" ({count} times)" if count > 1 else ""
            logging.getLogger(name).log(level, "%s%s", message, suffix)
