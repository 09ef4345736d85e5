"""The partition log: segments, indexes, recovery, retention (the storage layer)."""
