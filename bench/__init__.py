"""The harness and the `bench` command: generic over suites, it knows no kernel."""
