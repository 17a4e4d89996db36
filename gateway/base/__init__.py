"""The ground floor every package stands on: settings, keys, metrics, stopping, threads and logs."""
