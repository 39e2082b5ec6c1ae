"""Plain-torch reference implementations of the kernel contracts (slow, obviously correct)."""
