"""The public ``Tensor``: its parts (metadata, indexing, reductions, layouts, interop,
chunking, gradients, numbers, calls), each a mixin over one ``TensorBase``.

(The folder is ``tensors``, not ``tensor``: ``ax.tensor`` is the public constructor, and a
subpackage of that name would shadow it.)"""
