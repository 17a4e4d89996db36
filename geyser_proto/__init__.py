"""The Yellowstone geyser gRPC interface ("Dragon's Mouth"), shared by the devnode that serves it and
the gateway that consumes and re-serves it.

`geyser.proto` and `solana-storage.proto` are this project's own files with the public interface's
package names (`geyser`, `solana.storage.ConfirmedBlock`), service, rpcs, messages and field numbers,
so existing Yellowstone clients work unchanged. The Python modules beside them are generated and
checked in:

    from geyser_proto import geyser_pb2, geyser_pb2_grpc, solana_storage_pb2

    geyser_pb2.SubscribeRequest, geyser_pb2.SubscribeUpdate, ...     messages and enums
    geyser_pb2_grpc.GeyserStub(channel)                              the client
    geyser_pb2_grpc.GeyserServicer, add_GeyserServicer_to_server     the server side
    solana_storage_pb2.Transaction, TransactionStatusMeta, ...       the embedded block types

Regenerate after editing a .proto file with `.venv/bin/python -m geyser_proto.generate`. Nothing is
imported here, so that regenerating never depends on the modules being regenerated.

What serving the interface takes, written once for both servers (they may not import each other):

    geyser_proto.filters      a SubscribeRequest compiled into hashable filters, and their matching
    geyser_proto.fanout       one feed of updates to many streams, each distinct filter evaluated once
                              per update, commitment holds, the union request for an upstream
    geyser_proto.streaming    the grpc.aio side: the service's method table, a stream's bounded queue
                              with keepalive pings, the reading of a stream's requests
"""
