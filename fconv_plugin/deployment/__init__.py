"""Deployment forms of the paper's layers (not in the paper: ways to serve its model).

``int8``: each layer's int8 form (per-row int8 weights, float64 attention sums and gate),
swapped in by type for inference on CPUs (``FConvModel.quantize_int8_``, fconv-quantize).
Between the paper's layers (``modules``) and the fairseq model (``models``): it imports the
former and the compiled loops' loader (``native``), and the model imports it.
"""
