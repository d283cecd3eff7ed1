"""Files and the command line: ``.npy`` with a JSON sidecar, Zarr stores, the ``axesarray``
command."""
