"""The network phase: the HTTP client, the preflight, the lanes and the runner."""
