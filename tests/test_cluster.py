"""A real cluster: dask.distributed LocalCluster, 2 worker processes on the loopback
interface. Block functions pickle as expression recipes; each worker compiles or loads
its kernels from its own cache (a temporary AXESARRAY_CACHE_DIR); a worker killed
mid-computation is replaced and its tasks retried, and the result is still exact."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import axesarray as ax
from tests.conftest import assert_close

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("kernels"))
    old = os.environ.get("AXESARRAY_CACHE_DIR")
    os.environ["AXESARRAY_CACHE_DIR"] = cache  # spawned workers inherit it
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
        dashboard_address=None,
    )  # fmt: skip
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()
    if old is None:
        os.environ.pop("AXESARRAY_CACHE_DIR", None)
    else:
        os.environ["AXESARRAY_CACHE_DIR"] = old


def test_fused_chunks_and_reductions_on_workers(client, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.random((16, 40, 3, 4), "float32")
    b = ax.tensor(rng.random(40, "float32"), "C")
    t = ax.tensor(x, "N C H W").chunk({"N": 2, "C": 20})
    e = ax.sigmoid(t * 2 + b)
    assert_close(e, 1 / (1 + np.exp(-(x * 2 + b.numpy()[:, None, None]))))
    assert_close((t - b).sum(("N", "H")), (x - b.numpy()[:, None, None]).sum((0, 2)))
    assert_close(t.argmax("N"), x.argmax(0))
    y = t.to_layout("NCHW32")
    ax.to_zarr(y, tmp_path / "y.zarr")
    back = ax.open_zarr(tmp_path / "y.zarr")
    assert str(back.layout) == "NCHW32"
    assert_close(back, x)
    # the workers ran our kernels: their caches hold compiled kernels
    assert any(name.startswith("k_") for name in os.listdir(os.environ["AXESARRAY_CACHE_DIR"]))


def test_a_killed_worker_is_retried_and_the_result_is_exact(client):
    x = np.arange(64 * 1000, dtype="float64").reshape(64, 1000)
    t = ax.tensor(x, "N C").chunk({"N": 1})

    def slow(block):
        time.sleep(0.05)
        return block

    import dask.array as da

    before = set(client.run(os.getpid).values())
    slowed = ax.from_dask(da.map_blocks(slow, t.to_dask(), dtype=x.dtype), "N C")
    future = client.compute((slowed * 3 + 1).sum("C").to_dask())

    def kill_one():
        time.sleep(0.6)
        pid = next(iter(client.run(os.getpid).values()))
        os.kill(pid, 9)

    killer = threading.Thread(target=kill_one)
    killer.start()
    result = future.result(timeout=300)
    killer.join()
    assert_close(result, (x * 3 + 1).sum(1))
    client.wait_for_workers(2, timeout=120)
    assert set(client.run(os.getpid).values()) != before  # one worker was really replaced
