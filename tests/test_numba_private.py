"""Every private numba name the project uses (``numba_private.py``) still exists.

A numba upgrade that renames or removes one fails here, by name, instead of breaking a
kernel somewhere else.
"""

from __future__ import annotations

import pickle
from types import ModuleType

import numpy as np
import pytest
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from axesarray.storage import numba_private as npriv


def test_no_nrt_option_compiles():
    @njit(**npriv.NO_NRT)
    def twice(a):
        for i in range(a.size):
            a[i] *= 2

    x = np.arange(4.0)
    twice(x)
    np.testing.assert_array_equal(x, [0.0, 2.0, 4.0, 6.0])


def test_cgutils_helpers_build_a_loop_and_a_stack_slot():
    @intrinsic
    def count_up(typingctx, n):
        sig = types.int64(types.int64)

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            slot = npriv.alloca_once(builder, i64, 1)
            builder.store(ir.Constant(i64, 0), slot)
            with npriv.for_range(builder, args[0]) as loop:
                builder.store(builder.add(builder.load(slot), loop.index), slot)
            return builder.load(slot)

        return sig, codegen

    @njit
    def triangle(n):
        return count_up(n)

    assert triangle(5) == 0 + 1 + 2 + 3 + 4


def test_cache_hits_reads_a_dispatcher():
    @njit
    def one():
        return 1

    one()
    assert npriv.cache_hits(one) == 0  # compiled here, not loaded from a cache
    assert npriv.cache_hits(lambda: 1) == 0  # not a dispatcher


def test_load_cpu_target_runs():
    npriv.load_cpu_target()


def test_simulator_helpers():
    assert isinstance(npriv.cuda_simulated(), bool)
    if not npriv.cuda_simulated():
        return
    from numba import cuda

    arr = cuda.to_device(np.arange(3.0))
    assert npriv.is_simulator_array(arr)
    assert not npriv.is_simulator_array(np.arange(3.0))
    address = npriv.simulator_pointer(arr)
    assert isinstance(address, int) and address > 0
    assert npriv.simulator_pointer(arr) == address  # the backing array, not a copy


def _exec_kernel(directory, name: str):
    """A fresh dispatcher for the same function, as a new process would have."""
    source = "from numba import njit\n\n@njit\ndef kernel(x):\n    return x.sum() * 2\n"
    module = ModuleType(name)
    exec(compile(source, str(directory / f"{name}.py"), "exec"), module.__dict__)
    return module.kernel


def test_directory_cache_saves_and_loads_in_the_directory_given(tmp_path):
    store = tmp_path / "store"
    first = _exec_kernel(tmp_path, "k_private")
    assert npriv.attach_cache(first, npriv.DirectoryCache, str(store), "stamp-1")
    assert first(np.arange(4.0)) == 12.0
    assert npriv.cache_hits(first) == 0
    prefix = first._cache.prefix
    assert prefix.startswith("k_private.kernel-")
    assert sorted(p.name for p in store.iterdir()) == [f"{prefix}.1.nbc", f"{prefix}.nbi"]
    assert store.stat().st_mode & 0o777 == 0o700

    again = _exec_kernel(tmp_path, "k_private")
    npriv.attach_cache(again, npriv.DirectoryCache, str(store), "stamp-1")
    assert again(np.arange(4.0)) == 12.0
    assert npriv.cache_hits(again) == 1

    other = _exec_kernel(tmp_path, "k_private")  # another stamp: numba ignores the index
    npriv.attach_cache(other, npriv.DirectoryCache, str(store), "stamp-2")
    assert other(np.arange(4.0)) == 12.0
    assert npriv.cache_hits(other) == 0


def test_directory_cache_data_carries_a_checksum(tmp_path):
    first = _exec_kernel(tmp_path, "k_sum")
    npriv.attach_cache(first, npriv.DirectoryCache, str(tmp_path), "s")
    first(np.arange(3.0))
    (nbc,) = tmp_path.glob("*.nbc")
    digest, blob = pickle.loads(nbc.read_bytes())
    nbc.write_bytes(pickle.dumps((digest, blob[:-1] + bytes([blob[-1] ^ 1]))))
    again = _exec_kernel(tmp_path, "k_sum")
    npriv.attach_cache(again, npriv.DirectoryCache, str(tmp_path), "s")
    with pytest.raises(pickle.UnpicklingError, match="cache data does not match its SHA-256"):
        again(np.arange(3.0))


def test_attach_cache_leaves_anything_but_a_cpu_dispatcher_alone(tmp_path):
    def plain(x):
        return x

    assert not npriv.attach_cache(plain, npriv.DirectoryCache, str(tmp_path), "s")
    assert not hasattr(plain, "_cache")


def test_entry_point_calls_the_compiled_signature():
    @njit
    def axpy(out, x, a):
        for i in range(out.size):
            out[i] = a * x[i]

    x, out = np.arange(4.0), np.zeros(4)
    assert npriv.entry_point(axpy, (out, x, 2.0)) is None  # not compiled yet
    axpy(out, x, 2.0)
    call = npriv.entry_point(axpy, (out, x, 2.0))
    out[:] = 0
    call(out, x, 3.0)
    np.testing.assert_array_equal(out, 3.0 * x)
    assert npriv.entry_point(axpy, (out, x.astype(np.float32), 2.0)) is None  # other types
    assert npriv.entry_point(print, (out,)) is None


def test_call_inlined_links_a_compiled_function_and_inlines_it():
    @njit
    def poly(x):
        return x * x + 1.0

    cres = npriv.compiled_overload(poly, (types.float64,))
    assert cres.signature.return_type == types.float64

    @intrinsic
    def poly_inline(typingctx, x):
        def codegen(context, builder, sig, args):
            return npriv.call_inlined(context, builder, cres, sig, args)

        return types.float64(types.float64), codegen

    @njit
    def caller(x):
        return poly_inline(x) * 2.0

    assert caller(3.0) == 20.0
    llvm = next(iter(caller.inspect_llvm().values()))
    assert cres.fndesc.mangled_name not in llvm  # inlined: no call, no copy left


def test_target_features_and_a_function_attribute():
    seen = []

    @intrinsic
    def mark(typingctx):
        def codegen(context, builder, sig, args):
            seen.append(npriv.target_features(context))
            npriv.add_function_attribute(builder, '"axesarray-test"="1"')
            return context.get_dummy_value()

        return types.none(), codegen

    @njit
    def marked():
        mark()
        return 1

    assert marked() == 1
    assert seen and all(f[0] in "+-" for f in seen[0].split(","))  # "+avx2,-avx512f,..."
    llvm = next(iter(marked.inspect_llvm().values()))
    assert '"axesarray-test"="1"' in llvm
