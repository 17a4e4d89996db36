"""``/ws``: the upgrade and its caps, and each socket's session (subscriptions, their billing and limits).
The replica's shared subscriptions at the node's PubSub are :mod:`gateway.node.pubsub`."""
