"""The `orbench` command."""
