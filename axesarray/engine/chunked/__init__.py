"""Chunked (dask) evaluation: lowering expressions to dask graphs, and what a dask task runs."""
