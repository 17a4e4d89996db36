"""The composition root: the replica's app, the list of features and the replica's settings."""
