"""Decoding: where a sentence's decoding is decided and run, each part in its torch form and its compiled form.

- ``backend.py``: the one selector: which form of each part runs (``FCONV_NATIVE``, the
  loops built, the CPU's int8 features, precision, device, int8 weights, tracing), and
  why; ``fconv-info`` prints it;
- ``steps.py``: the decoder one target position at a time with its state in plain
  tensors (§3.2-3.3), the torch form; ``compiled_step.py``: the same step over
  ``native/decoder_step.cpp``; ``layer_functions.py``: the layers as functions of a
  matrix of rows, which both call;
- ``search.py``: beam search (§4.3) with fairseq's hypotheses, in torch operations, and
  over ``native/beam_candidates.cpp`` where ``backend`` names it.
- ``rules.py``: the search's rules stated once, which each form of the search (torch,
  compiled, and ``fconv_onnx``'s numpy) is tested against.

Layer: above the fairseq model (``models/``), below the inference core (``inference/``);
``backend.py`` alone stands lower, beside ``native/``, so that the int8 layers
(``deployment/``) ask it too. This file imports nothing, so that importing ``backend``
loads neither the step nor the search.
"""
