"""Authentication's settings: the secret API-key hashes are keyed with, and the public address that
Sign-In With Solana messages must name. They build on the limits' settings: failed authentications are
limited per client address (``ip_limits``' ``auth_failures``)."""

from __future__ import annotations

from pydantic import Field, field_validator

from gateway.auth.sign_in import PublicAddress
from gateway.limits.settings import LimitSettings


class AuthSettings(LimitSettings):
    """The API-key secret (the rest of what auth reads is shared: the payment terms, the data dir)."""

    api_key_secret: str | None = Field(
        None,
        repr=False,
        description="64 hex chars: HMAC key of stored API-key hashes; shared by all machines of a cluster. "
        "Empty: gateway up reads (or first creates) <home>/keys/api-key-secret and hands it to every process it "
        "starts, on any machine.",
    )

    public_url: str | None = Field(
        None,
        description="The gateway's public origin, http(s)://host[:port], as browsers reach it (the account page's "
        "address): Sign-In With Solana messages must name its host[:port] as their domain, whatever a request's Host "
        "header says. Empty: http://<host>:<port> (127.0.0.1 for a wildcard host), the embedded stack's page.",
    )

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        return PublicAddress.parse(value).origin

    @property
    def public_address(self) -> PublicAddress:
        """Where browsers reach the gateway: ``public_url``, or the address it listens on."""
        if self.public_url:
            return PublicAddress.parse(self.public_url)
        return PublicAddress.listening(self.host, self.port)

    @field_validator("api_key_secret")
    @classmethod
    def _check_secret(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        try:
            if len(bytes.fromhex(value)) == 32:
                return value
        except ValueError:
            pass
        raise ValueError("api_key_secret must be 64 hex characters (32 bytes)")

    @property
    def api_key_secret_bytes(self) -> bytes | None:
        return bytes.fromhex(self.api_key_secret) if self.api_key_secret else None
