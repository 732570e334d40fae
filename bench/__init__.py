"""The harness and the `bench` command: generic over suites, it knows no kernel."""

__version__ = "0.3.0"  # the one version number: pyproject.toml reads it from here
