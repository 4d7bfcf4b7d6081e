"""Exceptions the codec raises, each carrying what the server needs to react.

Framing errors mean the byte stream can no longer be split into requests, so the only
remedy is closing the connection. Request errors carry the api key, version and
correlation id as far as they could be read, so the server can still answer with a
Kafka error where the protocol has one (ApiVersions fallback, legacy Produce rejection)
and log something useful otherwise. Kafka error numbers come from kio's ``ErrorCode``.
"""

from __future__ import annotations

from typing import ClassVar

from kio.schema.errors import ErrorCode

__all__ = (
    "CodecError",
    "FrameError",
    "FrameTooLarge",
    "InvalidFrameSize",
    "RequestError",
    "UnknownApiKey",
    "UnsupportedVersion",
    "MalformedRequest",
)


class CodecError(Exception):
    """Base of everything the codec raises on bad input."""


class FrameError(CodecError):
    """The 4-byte size prefix of a frame is unacceptable; the stream is unusable.

    ``frames`` holds the complete frames that arrived before the bad size prefix in the
    same ``feed`` call, so the server may still serve them before it closes.
    """

    def __init__(self, message: str, size: int, frames: tuple[bytes, ...] = ()) -> None:
        super().__init__(message)
        self.size = size
        self.frames = frames


class FrameTooLarge(FrameError):
    """A frame announced more bytes than the configured maximum."""

    def __init__(self, size: int, max_frame_size: int, frames: tuple[bytes, ...] = ()) -> None:
        super().__init__(
            f"frame of {size} bytes exceeds the maximum of {max_frame_size}", size, frames
        )
        self.max_frame_size = max_frame_size


class InvalidFrameSize(FrameError):
    """A frame announced a size of zero or less."""

    def __init__(self, size: int, frames: tuple[bytes, ...] = ()) -> None:
        super().__init__(f"invalid frame size {size}", size, frames)


class RequestError(CodecError):
    """A complete frame that is not a request this broker can decode.

    Fields are ``None`` when the frame was too short to contain them. ``error_code`` is
    the Kafka error that best describes the problem; whether an error response can be
    sent at all depends on the API (Kafka itself closes the connection in most cases).
    """

    error_code: ClassVar[ErrorCode] = ErrorCode.invalid_request

    def __init__(
        self,
        message: str,
        *,
        api_key: int | None = None,
        api_version: int | None = None,
        correlation_id: int | None = None,
    ) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class UnknownApiKey(RequestError):
    """The api key is not in the advertised version table."""


class UnsupportedVersion(RequestError):
    """The version is outside the advertised range, or advertised but refused.

    ``body`` is set only for advertised-but-refused versions (Produce v0-2): the bytes
    after the request header, which ``encode_legacy_produce_rejection`` needs in order to
    answer every partition. Those versions predate flexible headers, so their header is
    always v1 and can be skipped without a schema.
    """

    error_code: ClassVar[ErrorCode] = ErrorCode.unsupported_version

    def __init__(
        self,
        message: str,
        *,
        api_key: int | None = None,
        api_version: int | None = None,
        correlation_id: int | None = None,
        body: bytes | None = None,
    ) -> None:
        super().__init__(
            message, api_key=api_key, api_version=api_version, correlation_id=correlation_id
        )
        self.body = body


class MalformedRequest(RequestError):
    """The frame does not decode: truncated, trailing bytes, bad lengths or values."""
