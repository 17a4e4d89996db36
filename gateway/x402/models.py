"""The bodies of ``POST /x402/settle`` as pydantic models, for the OpenAPI document (gateway/transports/openapi.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gateway.x402.rules import MAX_BODY_BYTES

#: The base64 string within the body's limit.
MAX_TRANSACTION_CHARS = MAX_BODY_BYTES - 32


class SettleRequest(BaseModel):
    """``POST /x402/settle``: a payment transaction (docs/api.md, x402)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"transaction": "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}]}
    )

    transaction: str = Field(
        max_length=MAX_TRANSACTION_CHARS,
        description="base64 of a signed (self-paid) or partially signed (sponsored: the fee payer's slot "
        "empty) legacy, v0 or v1 transaction that pays the deposit wallet at least 0.01 USDC",
    )


class SettleAnswer(BaseModel):
    success: bool = Field(description="true: the network accepted the payment (the message says if confirmed)")
    transaction: str = Field(description="the transaction's signature: confirm the deposit with it")
    network: str = Field(description="CAIP-2 id of the network, as in the payment terms")
    message: str
