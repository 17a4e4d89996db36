"""Generated modules of geyser.proto and solana-storage.proto: geyser_proto's, their imports rewritten (the
server's tests keep the two copies equal). The client never imports the server's package."""
