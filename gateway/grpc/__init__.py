"""The gRPC stream: Yellowstone's ``geyser.Geyser`` service, re-served to paying clients.

``rules.py``     prices, limits and status codes (pure)
``service.py``   the service: ``x-token`` auth, billing through the meter, per-account limits, the streams
``budget.py``    the filter budget: what the streams may ask of the one upstream subscription, a share per account
``replay.py``    the replay log of the node's recent feed, and ``from_slot``: a replay, then live, with no gap
``server.py``    one server process built from settings (run by ``gateway/grpc/stream_actor.py``)

The process's one subscription to the node's geyser endpoint is :mod:`gateway.node.geyser`; the
filters, the fan-out and the stream queues are :mod:`geyser_proto`'s, shared with the devnode.
"""
