"""The gRPC stream: Yellowstone's ``geyser.Geyser`` service, re-served to paying clients.

``upstream.py``  the process's one subscription to the node's geyser endpoint (the devnode's by default)
``service.py``   the service: ``x-token`` auth, billing through the meter, per-account limits, the streams
``budget.py``    the filter budget: what the streams may ask of the one upstream subscription, a share per account
``server.py``    one server process built from settings (run by ``actors/grpc_stream.py``)

The filters, the fan-out and the stream queues are :mod:`geyser_proto`'s, shared with the devnode.
"""
