"""A minimal Borsh writer and reader: the little-endian integers, bools, strings and pubkeys Anchor uses."""

from __future__ import annotations

import struct

from solders.pubkey import Pubkey

__all__ = ["BorshError", "Reader", "Writer"]


class BorshError(ValueError):
    """Raised when bytes do not decode as the expected Borsh value."""


class Writer:
    """Appends Borsh-encoded values to a byte buffer."""

    def __init__(self, prefix: bytes = b"") -> None:
        self._buf = bytearray(prefix)

    def raw(self, data: bytes) -> Writer:
        self._buf += data
        return self

    def u8(self, value: int) -> Writer:
        self._buf += struct.pack("<B", value)
        return self

    def u16(self, value: int) -> Writer:
        self._buf += struct.pack("<H", value)
        return self

    def u32(self, value: int) -> Writer:
        self._buf += struct.pack("<I", value)
        return self

    def u64(self, value: int) -> Writer:
        self._buf += struct.pack("<Q", value)
        return self

    def i64(self, value: int) -> Writer:
        self._buf += struct.pack("<q", value)
        return self

    def u128(self, value: int) -> Writer:
        self._buf += value.to_bytes(16, "little")
        return self

    def bool(self, value: bool) -> Writer:
        self._buf.append(1 if value else 0)
        return self

    def string(self, value: str) -> Writer:
        encoded = value.encode()
        self.u32(len(encoded))
        self._buf += encoded
        return self

    def pubkey(self, value: Pubkey) -> Writer:
        self._buf += bytes(value)
        return self

    def bytes(self) -> bytes:
        return bytes(self._buf)


class Reader:
    """Reads Borsh-encoded values from a byte string, front to back."""

    def __init__(self, data: bytes, offset: int = 0) -> None:
        self._data = data
        self.offset = offset

    def _take(self, n: int) -> bytes:
        end = self.offset + n
        if end > len(self._data):
            raise BorshError(f"need {n} bytes at offset {self.offset}, have {len(self._data) - self.offset}")
        chunk = self._data[self.offset : end]
        self.offset = end
        return chunk

    def at_end(self) -> bool:
        return self.offset >= len(self._data)

    def remaining(self) -> int:
        return max(0, len(self._data) - self.offset)

    def raw(self, n: int) -> bytes:
        return self._take(n)

    def u8(self) -> int:
        return int(self._take(1)[0])

    def u16(self) -> int:
        return int(struct.unpack("<H", self._take(2))[0])

    def u32(self) -> int:
        return int(struct.unpack("<I", self._take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack("<Q", self._take(8))[0])

    def i64(self) -> int:
        return int(struct.unpack("<q", self._take(8))[0])

    def u128(self) -> int:
        return int.from_bytes(self._take(16), "little")

    def bool(self) -> bool:
        value = self._take(1)[0]
        if value > 1:
            raise BorshError(f"invalid bool byte {value} at offset {self.offset - 1}")
        return value == 1

    def string(self) -> str:
        length = self.u32()
        return self._take(length).decode()

    def pubkey(self) -> Pubkey:
        return Pubkey.from_bytes(self._take(32))
