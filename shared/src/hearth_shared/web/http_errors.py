"""Error answers of both HTTP APIs: one body shape per kind, documented on every route that returns it.

Invariants (checked by schemathesis over both OpenAPI documents, tests/integration/test_hostile_http.py):
- every 4xx a route can answer is in its ``responses`` (``error_responses``), and the body matches;
- a 422 always has FastAPI's validation shape, ``{"detail": [{"loc", "msg", "type"}]}``, also when a
  route refuses something itself (``unprocessable``), so clients parse one shape;
- every other error is ``{"detail": "<what is wrong>"}`` (``ErrorBody``);
- an error answer is always valid JSON: a refused ``NaN`` or ``Infinity`` is echoed as text (Starlette
  refuses to encode non-finite floats, which made a refused ``"expires_in_s": NaN`` a 500).

Request bodies over a size limit get 413 before they are read whole (hearth_shared.web.body_limit).
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI, HTTPException, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from hearth_shared.web.body_limit import BodySizeLimit

DEFAULT_MAX_BODY_BYTES = 64 * 1024


class ErrorBody(BaseModel):
    """An error other than a 422: what is wrong, in words."""

    detail: str


_DESCRIPTIONS = {
    status.HTTP_400_BAD_REQUEST: "The request could not be read",
    status.HTTP_401_UNAUTHORIZED: "No token, or a token that is not valid",
    status.HTTP_403_FORBIDDEN: "The token may not do this",
    status.HTTP_404_NOT_FOUND: "Not found (also what another home's resources look like)",
    status.HTTP_409_CONFLICT: "Conflicts with what exists",
    status.HTTP_413_CONTENT_TOO_LARGE: "The request body is over the size limit",
    status.HTTP_503_SERVICE_UNAVAILABLE: "Not ready yet (read-your-writes waited in vain): retry",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route for these error status codes (422 is documented by FastAPI)."""
    return {code: {"model": ErrorBody, "description": _DESCRIPTIONS[code]} for code in codes}


def unprocessable(loc: tuple[str | int, ...], kind: str, message: str) -> HTTPException:
    """A 422 in FastAPI's validation shape, for what a route refuses itself."""
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT, [{"loc": list(loc), "type": kind, "msg": message}]
    )


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float written as text (``"nan"``, ``"inf"``), else unchanged."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


async def _validation_failed(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = json_safe(jsonable_encoder(exc.errors()))
    return JSONResponse({"detail": errors}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


def install_edge(app: FastAPI, *, max_body_bytes: int) -> None:
    """What both APIs do at their edge: 422s that are always JSON, bodies over ``max_body_bytes`` 413."""
    app.add_exception_handler(RequestValidationError, _validation_failed)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)
