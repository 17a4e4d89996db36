"""Getting a signed transaction onto the chain: the legs that carry it (the node's RPC, a bundle
relay, the leaders' TPU over QUIC), the race that sends on all of them at once and polls until it
lands, and the block engine's client. Network adapters, like :mod:`gateway.node.http`; no billing here.
"""
