"""The live page: ``/`` and its static files (a home's twins over ``WS /v1/subscribe``)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

from hearth_shared.web.http import not_found

STATIC = Path(__file__).parent / "static"

router = APIRouter()


@router.get("/", include_in_schema=False)
async def live_page() -> FileResponse:
    return FileResponse(STATIC / "index.html")


@router.get("/static/{name}", include_in_schema=False)
async def static_file(name: str) -> FileResponse:
    if name not in {path.name for path in STATIC.iterdir()}:
        raise not_found(name)
    return FileResponse(STATIC / name)
