"""What went wrong, said by the code that knows: raised anywhere (the pure core included), mapped to a status
once at each service edge (gRPC in `platform.rpc`, the bus in `platform.bus`).

Anything else that escapes a handler, a built-in `ValueError` or `KeyError` included, is a bug: gRPC answers
INTERNAL and logs it, the bus redelivers the message with backoff.
"""

from __future__ import annotations


class DomainError(Exception):
    """Base of the errors below; its message names the problem for the caller."""


class InvalidInput(DomainError, ValueError):
    """The input can never be processed as given (INVALID_ARGUMENT; a bus message is dead-lettered at once).
    A `ValueError`, so validation inside pydantic models and callers that catch `ValueError` still work."""


class NotFound(DomainError, LookupError):
    """A named thing (session, policy version, ...) does not exist (NOT_FOUND)."""


class FailedPrecondition(DomainError, RuntimeError):
    """The system is not in the state the call needs, e.g. nothing to train on yet (FAILED_PRECONDITION)."""


class ResourceExhausted(DomainError, RuntimeError):
    """A quota or limit was reached (RESOURCE_EXHAUSTED)."""


class Unavailable(DomainError, RuntimeError):
    """A dependency is down or gone, worth retrying later or elsewhere (UNAVAILABLE)."""


class PermissionDenied(DomainError, PermissionError):
    """The call is not allowed here, e.g. a world-changing action in read-only mode (PERMISSION_DENIED)."""


__all__ = ["DomainError", "FailedPrecondition", "InvalidInput", "NotFound", "PermissionDenied",
           "ResourceExhausted", "Unavailable"]
