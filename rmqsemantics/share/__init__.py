"""Share groups (KIP-932): the share-partition state machine, its settings and its state log."""
