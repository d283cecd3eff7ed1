"""Devices as backends: ``Device`` is a value ``(type, index)``; storage operations belong to
one backend class per kind of storage; an index is honoured or refused."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import axesarray as ax
from axesarray.storage.devices import (
    CupyBackend,
    HostBackend,
    NumbaBackend,
    SimulatorBackend,
    backend_for,
    device_of,
)

N = ax.Axis("N", 4)


def test_device_is_a_value_with_a_type_and_an_index():
    d = ax.Device("cuda", 1)
    assert (d.type, d.index, str(d)) == ("cuda", 1, "cuda:1")
    assert d == "cuda:1" and d != "cuda" and hash(d) == hash(ax.Device("cuda", 1))
    assert ax.Device("cpu") == "cpu" and ax.Device("cpu").backend == "numpy"


def test_every_backend_has_the_same_surface():
    """One class per kind of storage, each with every storage operation."""
    surface = {"available", "count", "index_of", "empty", "upload", "to_host", "write_host",
               "pointer", "array_view", "matmul", "has_blas", "strided_views", "name"}  # fmt: skip
    for cls in (HostBackend, NumbaBackend, SimulatorBackend, CupyBackend):
        assert surface <= set(dir(cls)), (cls, surface - set(dir(cls)))
    assert backend_for("cpu").name == "numpy"


def test_host_storage_round_trips_through_the_backend():
    dev = ax.Device("cpu")
    data = dev.empty(3, np.dtype("float32"))
    dev.write_host(data, np.arange(3, dtype="float32"))
    assert_close(dev.to_host(data), np.arange(3, dtype="float32"))
    assert device_of(data) == "cpu"


def test_moving_a_tensor_already_there_is_a_no_op():
    x = ax.tensor(np.arange(4.0), "N")
    assert x.to("cpu") is x and x.to(ax.Device("cpu")) is x


@pytest.mark.cuda
@pytest.mark.skipif(not ax.Device("cuda").available(), reason="no CUDA device and no simulator")
def test_an_index_the_backend_lacks_is_refused_before_any_copy():
    """numba and the simulator have one device: ``cuda:1`` is refused, never silently
    turned into ``cuda:0`` (it used to be accepted and dropped)."""
    if backend_for("cuda").name == "cupy":
        pytest.skip("CuPy honours every index on a real GPU (tested in test_cuda.py)")
    x = ax.tensor(np.arange(4.0), "N")
    with pytest.raises(ValueError) as e:
        x.to("cuda:1")
    text = str(e.value)
    assert text.startswith("to: device cuda:1 does not exist: the ")
    assert "has 1 cuda device (cuda:0). Use 'cuda'" in text
    y = x.to("cuda")  # following the hint works
    assert y.device == "cuda" and y.to("cuda") is y
    assert_close(y.numpy(), np.arange(4.0))
