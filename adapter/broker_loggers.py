"""The BROKER_LOGGER resource (type 8, KIP-412): the broker's log levels, listed by
DescribeConfigs and changed by IncrementalAlterConfigs at run time, as Kafka's
RuntimeLoggerManager does. Like Kafka's, a change is not persisted: a restart goes back to
``--log-level``. Legacy AlterConfigs does not take this resource, as in Kafka.

The loggers are ``root`` and the broker's own (``rmqkafka.*``, Python logging's names), each
with its effective level in log4j's names. SET takes DEBUG, ERROR, FATAL, INFO, TRACE or WARN
(TRACE is below DEBUG: Python logging has no TRACE, nothing logs at it); DELETE hands a
logger back to its parent's level (root's cannot be removed); APPEND / SUBTRACT are refused.
Refusals carry Kafka's codes and messages.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from .broker_configs import ConfigRefused

ROOT = "root"
PREFIX = "rmqkafka"
DYNAMIC_BROKER_LOGGER_CONFIG = 6
_TRACE = 5
_LEVELS = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING, "INFO": logging.INFO,
           "DEBUG": logging.DEBUG, "TRACE": _TRACE}
_NAMES = {number: name for name, number in _LEVELS.items()}
VALID = ",".join(sorted(_LEVELS))
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT else logging.getLogger(name)


def _level_name(number: int) -> str:
    """log4j's name of a Python level (the nearest one at or above it)."""
    return next((_NAMES[n] for n in sorted(_NAMES) if number <= n), "FATAL")


def loggers() -> dict[str, str]:
    """Logger name -> effective level: root first, then the broker's own, sorted."""
    names = sorted(n for n, lg in logging.root.manager.loggerDict.items()
                   if isinstance(lg, logging.Logger) and (n == PREFIX or n.startswith(PREFIX + ".")))
    return {ROOT: _level_name(logging.getLogger().getEffectiveLevel()),
            **{n: _level_name(logging.getLogger(n).getEffectiveLevel()) for n in names}}


def alter(operations, validate_only: bool) -> None:
    """Apply (name, operation, value) changes: all of them checked first, then applied."""
    known = loggers()
    changes: list[tuple[logging.Logger, int]] = []
    for name, operation, value in operations:
        if operation in (APPEND, SUBTRACT):
            raise ConfigRefused(ErrorCode.invalid_request,
                                f"{'APPEND' if operation == APPEND else 'SUBTRACT'} operation is not allowed "
                                "for the BROKER_LOGGER resource")
        if operation not in (SET, DELETE):
            raise ConfigRefused(ErrorCode.invalid_request,
                                f"Unknown operation type {operation} is not allowed for the BROKER_LOGGER resource")
        if name not in known:
            raise ConfigRefused(ErrorCode.invalid_config, f"Logger {name} does not exist!")
        if operation == DELETE:
            if name == ROOT:
                raise ConfigRefused(ErrorCode.invalid_request, "Removing the log level of the root logger is not allowed")
            changes.append((_logger(name), logging.NOTSET))
            continue
        level = _LEVELS.get(value) if value is not None else None  # log4j's names, case-sensitive
        if level is None:
            raise ConfigRefused(ErrorCode.invalid_config, f"Cannot set the log level of {name} to {value} as it is "
                                f"not a supported log level. Valid log levels are {VALID}")
        changes.append((_logger(name), level))
    if validate_only:
        return
    for logger, level in changes:
        logger.setLevel(level)
        logging.getLogger(__name__).info("log level of %s set to %s", logger.name,
                                         _level_name(logger.getEffectiveLevel()))
