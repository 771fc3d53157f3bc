"""Command-line interface: thin wrappers over the library."""
