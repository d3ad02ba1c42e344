"""``BodySizeLimit``: an ASGI middleware that refuses request bodies over a size limit with 413, unread.

A declared ``Content-Length`` over the limit is answered at once, before the application runs or a byte of
the body is read; a chunked body is counted as it is read and refused at the first chunk that crosses the
limit. Either way the answer is ``{"detail": "<the limit>"}`` JSON (hearth_shared.web.http_errors.ErrorBody).
Starlette's own limiter answers such requests in plain text, whatever the application's handlers say, so
both APIs use this one instead (a setting of each API: ``max_body_bytes``, 64 KiB by default).
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(HTTPException):
    """Raised while reading a body that crossed the limit (FastAPI passes HTTPExceptions on as they are)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body too large: at most {limit} bytes are accepted")


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(BodyTooLarge(self.max_bytes), scope, receive, send)
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, watched_send)
        except BodyTooLarge as refusal:
            if started:
                raise
            await self._refuse(refusal, scope, receive, send)

    @staticmethod
    async def _refuse(refusal: BodyTooLarge, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse({"detail": refusal.detail}, status_code=refusal.status_code)
        await response(scope, receive, send)
