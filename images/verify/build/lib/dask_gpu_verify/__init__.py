"""Verification client for a deployed Dask-CUDA cluster."""

__version__ = "0.1.0"
