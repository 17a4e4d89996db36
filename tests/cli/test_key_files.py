"""Secret files are private from the moment they exist (mode at creation, never a chmod after writing):
the API key ``gateway fund`` (and the examples) save beside the dev wallet, the keypairs (the service's
and the devnode's), and HAProxy's patched config (it holds the edge secret). Real files; the umask is
opened wide so that only the mode given at creation can make them private."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from devnode.persist import load_or_create_keypair as devnode_keypair
from gateway.base.keys import load_or_create_keypair
from gateway.runtime.haproxy_edge import patched_args
from gateway_client.dev_wallet import save_api_key
from tests.runtime.test_haproxy_edge import CONFIG

OLD_KEY, NEW_KEY = "srpc_live_old", "srpc_live_new"


@pytest.fixture
def open_umask() -> Iterator[None]:
    """Files created with the default mode would be readable (and writable) by everyone."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
def test_the_saved_api_key_is_private_in_a_private_directory(tmp_path: Path) -> None:
    path = save_api_key(NEW_KEY, tmp_path / "wallets" / "dev-wallet.json")  # as `gateway fund` saves it
    assert path == tmp_path / "wallets" / "dev-wallet.api-key" and path.read_text() == NEW_KEY + "\n"
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


@pytest.mark.usefixtures("open_umask")
def test_a_reader_of_the_old_key_file_never_reads_the_new_key(tmp_path: Path) -> None:
    """A key file left readable by others (an older gateway fund, a copy): whoever opened it then must
    not read the next key through it. Writing into the same file and chmod-ing after lets them."""
    path = tmp_path / "dev-wallet.api-key"
    path.write_text(OLD_KEY + "\n")
    path.chmod(0o644)
    reader = os.open(path, os.O_RDONLY)  # another user, while the file was open to all
    try:
        save_api_key(NEW_KEY, tmp_path / "dev-wallet.json")
        assert os.pread(reader, 100, 0) == (OLD_KEY + "\n").encode()
    finally:
        os.close(reader)
    assert path.read_text() == NEW_KEY + "\n" and mode(path) == 0o600


@pytest.mark.usefixtures("open_umask")
def test_a_new_keypair_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "deposit-wallet.json"
    keypair = load_or_create_keypair(path)
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert load_or_create_keypair(path) == keypair
    devnode_path = tmp_path / "devnode" / "usdc-authority.json"  # the devnode's keys, the same way
    devnode_path.parent.mkdir()
    assert devnode_keypair(devnode_path) == devnode_keypair(devnode_path) and mode(devnode_path) == 0o600


@pytest.mark.usefixtures("open_umask")
def test_the_patched_haproxy_config_holding_the_secret_is_private(tmp_path: Path) -> None:
    config = tmp_path / "haproxy.cfg"
    config.write_text(CONFIG)
    stale = tmp_path / "haproxy.cfg.gateway"  # a previous start's copy, left readable
    stale.write_text("old")
    stale.chmod(0o644)
    reader = os.open(stale, os.O_RDONLY)
    try:
        args = patched_args(["haproxy", "-f", str(config)], "edge-s3cret", 10.0)
        assert os.pread(reader, 100, 0) == b"old"
    finally:
        os.close(reader)
    assert args[2] == str(stale) and "edge-s3cret" in stale.read_text()
    assert mode(stale) == 0o600
