"""A gRPC call's failure as a blocking stub raises it, for unit tests of what callers make of each status."""

from __future__ import annotations

import grpc


class RpcStatus(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details
