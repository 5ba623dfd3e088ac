"""The runtime: the daemon, live, attached and adopted sessions, the store, spills and processes."""
