"""gpuwatch: GPU observability and cost analytics for Kubernetes."""

__version__ = "0.1.0"
