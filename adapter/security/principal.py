"""Who a connection is: Kafka's ``Type:name`` principal and the client's address.

A PLAINTEXT connection, and a TLS one without a client certificate, is ``User:ANONYMOUS``;
SASL makes it ``User:<username>``; a TLS client certificate makes it ``User:<subject DN>``
in RFC 2253 form, most specific name first (Kafka's ``ssl.principal.mapping.rules=DEFAULT``).
"""

from __future__ import annotations

from dataclasses import dataclass

ANONYMOUS_NAME = "ANONYMOUS"
USER_TYPE = "User"


class PrincipalError(ValueError):
    """A principal string that is not ``Type:name``."""


@dataclass(frozen=True, slots=True)
class Principal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> Principal:
        """``User:alice`` -> Principal("User", "alice"); the name may contain colons."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise PrincipalError(f"Could not parse principal from `{text}` (no colon is present "
                                 "separating the principal type from the principal name)")
        return cls(kind, name)


ANONYMOUS = Principal(USER_TYPE, ANONYMOUS_NAME)


def user(name: str) -> Principal:
    return Principal(USER_TYPE, name)


@dataclass(frozen=True, slots=True)
class Session:
    """The authenticated identity of one connection, as the authorizer sees it."""

    principal: Principal
    client_host: str  # the peer's IP address, what an ACL's host is compared with


# Kafka's short names for certificate attributes, as X500Principal.getName() writes them
_DN_NAMES = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape_dn_value(value: str) -> str:
    escaped = "".join("\\" + ch if ch in ',+"\\<>;=' else ch for ch in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def certificate_principal(peer_cert: dict | None) -> Principal:
    """The principal of a verified TLS client certificate (``ssl.getpeercert()``'s dict):
    ``User:CN=alice,OU=dev,O=example``; ANONYMOUS without a certificate."""
    if not peer_cert or not peer_cert.get("subject"):
        return ANONYMOUS
    rdns = []
    for rdn in reversed(peer_cert["subject"]):  # RFC 2253 writes the most specific first
        rdns.append("+".join(f"{_DN_NAMES.get(k, k)}={_escape_dn_value(v)}" for k, v in rdn))
    return user(",".join(rdns))
