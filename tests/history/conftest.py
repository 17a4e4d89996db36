"""The sending tests' fixtures (tests/sending/conftest.py, its ``__all__``): a gateway in this process in
front of the session's devnode, a paying caller, a funded payer, and a gateway behind a relay that can
fail on purpose. Reads with added value need real fee-paying transactions on the chain."""

from tests.sending.conftest import *  # noqa: F403 -- pytest finds the fixtures by their names here
