"""What a tensor is, without reading it: axes, shape, dtype, strides, layout, device, and
the ``TensorDescription`` value (a mixin of ``Tensor``).

Every property is metadata: none evaluates an r-tensor or touches storage.
"""

from __future__ import annotations

import math
import types

import attrs
import numpy as np

from ..core.axes import Axes
from ..dag import nodes as ex
from ..storage.devices import as_device, device_of

__all__ = ["DescribeMethods", "TensorDescription"]


@attrs.frozen
class TensorDescription:
    """What is known about a tensor without reading it (Nervana graph's description).

    ``strides`` and ``offset`` are in bytes (numpy's convention) for l-tensors and None for
    r-tensors; a blocked axis has stride None; ``offset`` is where element 0 is (inside a
    block for a view that starts mid-block). ``allocated`` counts the storage's elements,
    padding included.

    >>> import axesarray as ax, numpy as np
    >>> d = ax.tensor(np.zeros((2, 3), "float32"), "N C").transpose("C N").description
    >>> d.strides, d.offset, d.allocated, d.read_only
    ((4, 12), 0, 6, False)
    """

    dtype: np.dtype
    rank: int
    axes: Axes
    read_only: bool
    strides: tuple | None
    offset: int | None
    allocated: int | None
    layout: object = None
    device: object = "cpu"  # a devices.Device (compares equal to "cpu", "cuda"...)


def _first(view) -> int:
    """The address of element 0: a view starting inside a block starts ``phase`` lanes in."""
    return view.offset + sum(b.phase * b.inner for b in view.blocks or () if b is not None)


class DescribeMethods:
    """The metadata properties of a tensor.

    >>> import axesarray as ax, numpy as np
    >>> x = ax.tensor(np.zeros((2, 3), "float32"), "N C")
    >>> x.names, x.shape, x.ndim, x.rank, x.size, x.dtype, x.itemsize, x.nbytes
    (('N', 'C'), (2, 3), 2, 2, 6, dtype('float32'), 4, 24)
    """

    __slots__ = ()

    @property
    def axes(self) -> Axes:
        """The named axes in logical order (an ``ax.Axes``).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((2, 3)), "N C").axes
        Axes(Axis('N', 2), Axis('C', 3))
        """
        return self._axes

    @property
    def names(self) -> tuple[str, ...]:
        """The axis names in logical order.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((2, 3)), "N C").transpose("C N").names
        ('C', 'N')
        """
        return self.axes.names

    @property
    def sizes(self) -> types.MappingProxyType:
        """Name -> length, in logical order (xarray's ``sizes``; read-only).

        >>> import axesarray as ax, numpy as np
        >>> dict(ax.tensor(np.zeros((2, 3)), "N C").sizes)
        {'N': 2, 'C': 3}
        """
        return types.MappingProxyType({a.name: a.length for a in self.axes})

    @property
    def shape(self) -> tuple[int, ...]:
        """The axis lengths in logical order (numpy's shape of ``t.numpy()``).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((2, 3)), "N C").shape
        (2, 3)
        """
        return self.node.shape

    @property
    def ndim(self) -> int:
        """The number of axes (also ``rank``).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((2, 3)), "N C").ndim
        2
        """
        return len(self.axes)

    rank = ndim

    @property
    def size(self) -> int:
        """The number of elements (padding of blocked layouts not counted).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((1, 3, 2, 2)), "N C H W").to_layout("NCHW4").size
        12
        """
        return math.prod(self.node.shape)

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of the elements (of the result, for an r-tensor).

        >>> import axesarray as ax, numpy as np
        >>> (ax.tensor(np.arange(3), "N") / 2).dtype
        dtype('float64')
        """
        return self.node.dtype

    @property
    def itemsize(self) -> int:
        """Bytes per element.

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros(3, "float16"), "N").itemsize
        2
        """
        return self.node.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the logical elements (``size * itemsize``; padding not counted).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((2, 3), "float32"), "N C").nbytes
        24
        """
        return self.size * self.itemsize

    @property
    def is_lvalue(self) -> bool:
        """True for an l-tensor (has storage, can be assigned to), False for an r-tensor.

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.zeros(3), "N")
        >>> x.is_lvalue, (x + 1).is_lvalue, (x + 1).eval().is_lvalue
        (True, False, True)
        """
        return isinstance(self.node, ex.Leaf)

    @property
    def strides(self) -> tuple | None:
        """Byte strides per axis (numpy's convention); None for an r-tensor.

        A blocked axis (the C of NCHWx) has no single stride and reports None.

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.zeros((2, 3), "float32"), "N C")
        >>> x.strides, x.transpose("C N").strides, (x + 1).strides
        ((12, 4), (4, 12), None)
        """
        node = self.node
        if not isinstance(node, ex.Leaf):
            return None
        size = node.dtype.itemsize
        blocks = node.view.blocks or (None,) * node.ndim
        return tuple(
            s * size if b is None else None for s, b in zip(node.view.strides, blocks, strict=True)
        )

    @property
    def layout(self):
        """The layout tag (see ``ax.Layout``), or None for plain strided tensors.

        >>> import axesarray as ax, numpy as np
        >>> x = ax.tensor(np.zeros((1, 3, 2, 2)), "N C H W")
        >>> x.layout, str(x.to_layout("NCHW4").layout)
        (None, 'NCHW4')
        """
        return self._layout

    @property
    def device(self):
        """Where the storage is (an r-tensor: where its inputs are): a ``Device`` that
        compares equal to ``"cpu"``, ``"cuda"``, ``"cuda:1"``...

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros(3), "N").device == "cpu"
        True
        """
        node = self.node
        if type(node) is ex.Leaf:
            return device_of(node.data)
        for p in node.params:
            if type(p) is ex.Leaf:
                return device_of(p.data)
        return as_device("cpu")

    @property
    def description(self) -> TensorDescription:
        """Everything above in one value (see ``TensorDescription``).

        >>> import axesarray as ax, numpy as np
        >>> ax.tensor(np.zeros((2, 3)), "N C").description.read_only
        False
        """
        node = self.node
        lvalue = isinstance(node, ex.Leaf)
        return TensorDescription(
            dtype=self.dtype,
            rank=self.ndim,
            axes=self.axes,
            read_only=not (lvalue and node.writeable),
            strides=self.strides,
            offset=_first(node.view) * node.dtype.itemsize if lvalue else None,
            allocated=node.data.size if lvalue else None,
            layout=self.layout,
            device=self.device,
        )
