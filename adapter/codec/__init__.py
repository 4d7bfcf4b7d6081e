"""Sans-IO Kafka codec: frames from bytes, kio requests from frames, frames from responses.

Nothing here does I/O or imports asyncio, so every byte path can be tested and fuzzed.
"""

from .errors import CodecError
from .errors import FrameError
from .errors import FrameTooLarge
from .errors import InvalidFrameSize
from .errors import MalformedRequest
from .errors import RequestError
from .errors import UnknownApiKey
from .errors import UnsupportedVersion
from .fast_responses import Encoded
from .fast_responses import encode_fetch_response
from .fast_responses import encode_produce_response
from .fast_responses import frame_parts
from .fast_responses import response_parts
from .framing import FrameDecoder
from .framing import frame
from .messages import Request
from .messages import decode_request
from .messages import encode_api_versions_fallback
from .messages import encode_legacy_produce_rejection
from .messages import encode_response
from .messages import response_type
from .versions import ADVERTISED_VERSIONS
from .versions import REJECTED_VERSIONS
from .versions import ApiKey
from .versions import VersionRange
from .versions import advertised_range
from .versions import is_advertised
from .versions import is_rejected
from .versions import is_supported
from .versions import supported_versions

__all__ = (
    "ADVERTISED_VERSIONS",
    "REJECTED_VERSIONS",
    "ApiKey",
    "CodecError",
    "Encoded",
    "FrameDecoder",
    "FrameError",
    "FrameTooLarge",
    "InvalidFrameSize",
    "MalformedRequest",
    "Request",
    "RequestError",
    "UnknownApiKey",
    "UnsupportedVersion",
    "VersionRange",
    "advertised_range",
    "decode_request",
    "encode_api_versions_fallback",
    "encode_fetch_response",
    "encode_legacy_produce_rejection",
    "encode_produce_response",
    "encode_response",
    "frame",
    "frame_parts",
    "is_advertised",
    "is_rejected",
    "is_supported",
    "response_parts",
    "response_type",
    "supported_versions",
)
