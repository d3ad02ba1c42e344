"""``DELETE /v1/tokens/{token_id}``: revoke a token (admin tokens only; a home token gets 403).

The revocation is a ``token.revoked`` fact on the revocations topic (``hearth_shared.adapters.revocations``);
the answer comes once the broker has it, and every API process (this one included) refuses the token within
about a second after. Token ids are not kept anywhere (tokens are stateless), so any well-formed id can be
revoked, also one of a token that was never made; revoking twice is the same fact.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status
from pydantic import BaseModel, Field

from hearth_command_api.entrypoints.deps import CurrentPrincipal, Writer
from hearth_shared.schema.ids import IDENTIFIER_PATTERN
from hearth_shared.schema.revocations import token_revoked

router = APIRouter(prefix="/v1")


class TokenRevokedView(BaseModel):
    token_id: str
    revoked: bool = Field(True, description="Always true: the revocation is in the journal")
    revoked_at: datetime


@router.delete(
    "/tokens/{token_id}",
    summary="Revoke a token (admin only); it gets 401 on every API within seconds",
    responses={403: {"description": "Not an admin token"}},
)
async def revoke_token(
    token_id: Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description="The token's id (jti)")],
    principal: CurrentPrincipal,
    writer: Writer,
) -> TokenRevokedView:
    if not principal.admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "only an admin token may revoke tokens")
    fact = token_revoked(token_id, reason="revoked through the command API", by=principal.token_id or "")
    await writer.revoke(fact)
    return TokenRevokedView(token_id=token_id, revoked_at=fact.revoked_at)
