"""Implementations, one subpackage per suite, each registering named variants."""
