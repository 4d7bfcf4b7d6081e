"""The server-side TLS context of SSL and SASL_SSL listeners, from PEM files.

Built once at start-up; a key that does not load or a certificate that does not match it
stops the broker with a message naming the file, before any listener accepts a connection.
"""

from __future__ import annotations

import ssl

from ..config import TlsConfig


class TlsConfigError(ValueError):
    pass


def server_context(config: TlsConfig) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3 if config.min_version == "TLSv1.3" else ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.keystore_location, password=config.key_password)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.keystore.location {config.keystore_location}: cannot load the "
                             f"certificate chain and key ({exc})") from None
    if config.truststore_location:
        try:
            context.load_verify_locations(cafile=config.truststore_location)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"ssl.truststore.location {config.truststore_location}: cannot load "
                                 f"the CA certificates ({exc})") from None
    context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[config.client_auth]
    return context
