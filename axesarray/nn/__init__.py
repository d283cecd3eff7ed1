"""Neural-network programs: tensor kinds and ``ax.function`` (``graph``), symbolic ops with
hand-written gradients (``functional``) and optimizers (``optim``, also ``axesarray.optim``)."""
