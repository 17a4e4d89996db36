-- An operator's overrides of an account's gRPC stream limits (`gateway account limits --streams
-- --stream-opens --address-streams`, docs/operations.md), like rate_limit_rps and concurrency_limit: null
-- takes the settings' default (grpc_max_streams_per_account, grpc_max_stream_opens_per_minute,
-- grpc_max_streams_per_address). Each change is an operator_actions row (action `limits`).
ALTER TABLE accounts
    ADD COLUMN grpc_max_streams              INTEGER CHECK (grpc_max_streams > 0),
    ADD COLUMN grpc_max_opens_per_minute     INTEGER CHECK (grpc_max_opens_per_minute > 0),
    ADD COLUMN grpc_max_streams_per_address  INTEGER CHECK (grpc_max_streams_per_address > 0);
