"""What evoskill's gRPC server interceptors (`metrics.RpcMetricsInterceptor`, `rpc.RequestLimits`) share: each
serves a method through a wrapper of its behaviour, chosen by the method's kind of call."""

from __future__ import annotations

import abc
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import grpc

Behavior = Callable[..., Any]

# grpc's kinds of call (the handler's attribute holding the behaviour), each with what makes a handler of it.
_HANDLER_OF_KIND = {
    "unary_unary": grpc.unary_unary_rpc_method_handler,
    "stream_unary": grpc.stream_unary_rpc_method_handler,
    "unary_stream": grpc.unary_stream_rpc_method_handler,
    "stream_stream": grpc.stream_stream_rpc_method_handler,
}


class WrappingInterceptor(grpc.aio.ServerInterceptor):
    """Serves each method through `wrap(handler, method)`; a method no handler serves stays unserved."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        return self.wrap(handler, handler_call_details.method)  # type: ignore[attr-defined]

    @abc.abstractmethod
    def wrap(self, handler: grpc.RpcMethodHandler[Any, Any], method: str) -> grpc.RpcMethodHandler[Any, Any]:
        """`handler` of `method` ("/package.Service/Method") as this interceptor serves it."""


def wrapped_handler(handler: grpc.RpcMethodHandler[Any, Any], wraps: Mapping[str, Callable[[Behavior], Behavior]],
                    request_deserializer: Callable[[bytes], Any] | None) -> grpc.RpcMethodHandler[Any, Any]:
    """`handler` with its behaviour wrapped by `wraps[kind]` for its kind of call (unary_unary, stream_unary,
    unary_stream, stream_stream) and its requests decoded by `request_deserializer`; a kind without an entry in
    `wraps` keeps the handler as it is."""
    for kind, handler_of in _HANDLER_OF_KIND.items():
        behavior = getattr(handler, kind)
        if behavior:
            wrap = wraps.get(kind)
            if wrap is None:
                return handler
            return handler_of(wrap(behavior), request_deserializer=request_deserializer,
                              response_serializer=handler.response_serializer)
    return handler


async def streamed(result: Any) -> AsyncIterator[Any]:
    """The messages of what a server-streaming behaviour returned: an async iterator's or an iterable's items;
    a coroutine sends its own (context.write), and is awaited."""
    if hasattr(result, "__aiter__"):
        async for item in result:
            yield item
    elif inspect.isawaitable(result):
        await result
    else:
        for item in result:
            yield item
