"""Reverse mode over the DAG (one rule per node kind) and programs of several outputs."""
