"""Starting and stopping the parts of the service: embedded databases, the devnode, Ray and Serve."""
