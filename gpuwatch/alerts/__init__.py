"""Generated Prometheus rules: recording rules, alerts, and the files ``gpuwatch alerts render``
writes (see docs/alerts.md)."""
