"""Authentication outcomes: counted for /metrics, failures logged at INFO, rate-limited.

Every failed TLS handshake and SASL login is counted per (listener, mechanism, reason) and
logged with the peer and the reason, as Kafka's Selector logs "Failed authentication with
...". A client that fails a thousand times a second must not fill the log: at most
``burst`` lines go out at once, then one per ``interval_s``; the lines left out are
counted and the next line says how many. Labels are bounded: the mechanism is one the
listener enables (or empty), never a string the client sent.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

log = logging.getLogger("rmqkafka.authentication")

# reasons (the ``reason`` label of rmqk_failed_authentication_total)
SSL_HANDSHAKE_FAILED = "ssl_handshake_failed"
SASL_AUTHENTICATION_FAILED = "sasl_authentication_failed"
UNSUPPORTED_SASL_MECHANISM = "unsupported_sasl_mechanism"
ILLEGAL_SASL_STATE = "illegal_sasl_state"


class AuthenticationEvents:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic, burst: int = 10,
                 interval_s: float = 1.0) -> None:
        self._monotonic = monotonic
        self._burst = burst
        self._interval_s = interval_s
        self._tokens = float(burst)
        self._refilled_at = monotonic()
        self.suppressed = 0  # failure lines left out since the last one logged
        self.failed: Counter[tuple[str, str, str]] = Counter()  # (listener, mechanism, reason)
        self.succeeded: Counter[tuple[str, str]] = Counter()  # (listener, mechanism)
        self.reauthenticated: Counter[tuple[str, str]] = Counter()  # (listener, mechanism)
        self.expired: Counter[str] = Counter()  # listener: connections closed on an expired session

    def failure(self, listener: str, mechanism: str, reason: str, peer: str, message: str,
                reauthentication: bool = False) -> None:
        self.failed[(listener, mechanism, reason)] += 1
        if not self._may_log():
            self.suppressed += 1
            return
        more = f" ({self.suppressed} more failed authentications not logged)" if self.suppressed else ""
        self.suppressed = 0
        log.info("Failed %sauthentication with %s on listener %s%s: %s%s", "re-" if reauthentication else "",
                 peer, listener, f" ({mechanism})" if mechanism else "", message, more)

    def success(self, listener: str, mechanism: str, reauthentication: bool) -> None:
        (self.reauthenticated if reauthentication else self.succeeded)[(listener, mechanism)] += 1

    def _may_log(self) -> bool:
        now = self._monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._refilled_at) / self._interval_s)
        self._refilled_at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True
