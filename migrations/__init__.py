"""gpuwatch's Alembic migration history (installed as ``gpuwatch.migrations``)."""
