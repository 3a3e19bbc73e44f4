"""Events larger than the bus takes travel through JetStream's object store (the claim-check pattern).

NATS refuses a message over the server's `max_payload` (1 MiB unless the server is configured otherwise;
the embedded nats-server keeps the default, and the limit is read from the server, never assumed). A
message that fits is published as it is. A larger one (a long ScienceWorld episode with thousands of valid
actions per step) is put in the object store bucket `<stream>-payloads`, in chunks, and the message keeps
only a bounded reference: the header `evoskill-payload` = "<bucket>/<object>", and an empty body. A
consumer gets the original bytes either way, so any subject takes a message of any size and no handler
knows the difference. Objects are kept as long as stream messages (`nats.max_age_s`), so a consumer
replaying the stream still finds them; a reference whose object is gone (expired, deleted, corrupt) can
never be processed and is dead-lettered like an undecodable message, and so is one whose object is over
the bus's `nats.max_message_bytes` (its size is read before a byte of it is fetched).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

from nats.js.api import ObjectStoreConfig
from nats.js.errors import BadRequestError, DigestMismatchError, NotFoundError
from nats.js.object_store import ObjectStore

PAYLOAD_HEADER = "evoskill-payload"
HEADROOM = 8 * 1024  # the headers (trace context, the reference) count against max_payload too
FETCH_TIMEOUT_S = 60.0  # an object whose chunks expired before its metadata would be waited for forever


def payload_bucket(stream: str) -> str:
    """The object store bucket of the stream's large events."""
    return f"{stream}-payloads"


class PayloadMissingError(Exception):
    """The object a message refers to is not in the store (any more): the message cannot be processed."""


class PayloadTooLargeError(Exception):
    """The object a message refers to is over the size any event may have: it is never fetched."""


class Payloads:
    """Claim checks for one bus connection: `outgoing` before publishing, `incoming` before decoding."""

    def __init__(self, broker: Any, bucket: str, ttl_s: float, max_bytes: int) -> None:
        self.broker = broker  # a connected FastStream NatsBroker
        self.bucket = bucket
        self.ttl_s = ttl_s
        self.max_bytes = max_bytes
        self._stores: dict[str, ObjectStore] = {}

    @property
    def limit(self) -> int:
        """The largest body published inline: the server's max_payload less room for the headers."""
        return int(self.broker.config.connection_state.connection.max_payload) - HEADROOM

    async def _store(self, bucket: str, create: bool = False) -> ObjectStore:
        store = self._stores.get(bucket)
        if store is None:
            js = self.broker.config.connection_state.stream
            if create:
                try:  # idempotent where the bucket exists with this configuration
                    store = await js.create_object_store(bucket, ObjectStoreConfig(ttl=self.ttl_s))
                except BadRequestError:  # it exists with another configuration (an older TTL): use it
                    store = await js.object_store(bucket)
            else:
                store = await js.object_store(bucket)  # BucketNotFoundError when never created
            self._stores[bucket] = store
        return store

    async def outgoing(self, subject: str, data: bytes,
                       headers: dict[str, str] | None) -> tuple[bytes, dict[str, str] | None]:
        """(body, headers) to publish: `data` itself when it fits, else an empty body and the reference."""
        if len(data) <= self.limit:
            return data, headers
        name = f"{subject}.{uuid.uuid4().hex}"
        await (await self._store(self.bucket, create=True)).put(name, data)
        return b"", {**(headers or {}), PAYLOAD_HEADER: f"{self.bucket}/{name}"}

    async def incoming(self, body: bytes, headers: Mapping[str, Any] | None) -> bytes:
        """The message's bytes: its body, or the object its reference names."""
        reference = (headers or {}).get(PAYLOAD_HEADER)
        if not reference:
            return body
        bucket, _, name = str(reference).partition("/")
        try:
            store = await self._store(bucket)
            size = (await store.get_info(name)).size or 0
            if size > self.max_bytes:
                raise PayloadTooLargeError(f"the payload object {reference[:256]} has {size} bytes, over "
                                           f"nats.max_message_bytes ({self.max_bytes})")
            result = await asyncio.wait_for(store.get(name), FETCH_TIMEOUT_S)
        except (NotFoundError, DigestMismatchError) as exc:
            raise PayloadMissingError(f"the payload object {reference[:256]} is gone ({type(exc).__name__})") from exc
        return bytes(result.data or b"")
