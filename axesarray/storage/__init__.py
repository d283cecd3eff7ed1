"""Where values live: aligned memory, devices (one backend per device kind), layouts,
and the one door to numba's private names."""
