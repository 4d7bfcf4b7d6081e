"""Share groups (KIP-932) in the adapter: share sessions, the share-partition manager and its settings."""
