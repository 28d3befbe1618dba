"""What can go wrong with a gallery, as exceptions the service and the CLI translate."""

from __future__ import annotations


class StoreError(Exception):
    """A gallery is missing, incomplete, corrupt or cannot be written."""


class IdentityMismatch(StoreError):
    """The stored vectors were built by something other than what the caller expects."""


class UnknownItemError(StoreError, KeyError):
    """No live item has this id (never added, or already removed)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown item"
