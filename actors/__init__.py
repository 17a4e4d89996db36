"""The service's Ray actors: one module per owner of state, as the design card's top level names them.

Each module takes its feature's plain class (``gateway/<feature>/*_actor.py``: testable without Ray, see
docs/architecture.md) and makes it a Ray actor with its options (named, detached, restarted after a
crash, placed over the nodes), started and stopped here. ``ray.remote`` is applied in this package and
nowhere else (``tests/test_import_contracts.py``). ``service`` lists them all, as groups that
the Serve app's ``Service`` deployment (gateway/runtime/service_deployment.py) and ``gateway up``
(gateway/runtime/stack.py) start, and ``gateway up`` and ``gateway actors stop`` stop.

Beside them, what the processes that reach the actors use of Ray (``shard_client``, ``pool_health``, the
racers' lookup in ``send_racers``), the Ray metrics backend every Ray process installs (``metrics``), and
what the actors share with the runtime (``cluster``: the namespace, the stop's helpers). The runtime
imports this package; it imports nothing of the runtime or the CLI back (the ``actors-below-the-runtime``
contract), so these live here rather than in ``gateway/runtime/``.

| module | owns | actors |
|---|---|---|
| ``account_shards`` | rate buckets and concurrency budgets | ``account-shard-N`` |
| ``deposit_watcher`` | the deposit address's cursor | ``deposit-watcher`` |
| ``send_racers`` | races in flight | ``send-racer-N`` |
| ``send_reconciler`` | held sends whose outcome is unknown | ``send-reconciler`` |
| ``signal_classifier`` | the signal stream's cursor and recent window | ``signal-classifier`` |
| ``webhook_watcher`` | transaction watches and signal webhooks' cursors | ``webhook-watcher`` |
| ``webhook_dispatchers`` | claimed delivery jobs | ``webhook-dispatcher-N`` |
| ``grpc_streams`` | open gRPC streams and their upstream subscription | ``grpc-stream-N`` |
| ``upstream_health`` | the nodes' health: slots, lag, errors, latency, cordons | ``upstream-health`` |
"""
