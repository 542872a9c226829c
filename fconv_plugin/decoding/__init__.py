"""Decoding: where a sentence's decoding is decided and run, each part in its torch form and its compiled form.

- ``steps.py``: the decoder one target position at a time with its state in plain
  tensors (§3.2-3.3), the torch form; ``compiled_step.py``: the same step over
  ``native/decoder_step.cpp``; ``layer_functions.py``: the layers as functions of a
  matrix of rows, which both call;
- ``search.py``: beam search (§4.3) with fairseq's hypotheses, in torch operations, and
  over ``native/beam_candidates.cpp`` where the selector (``fconv_plugin/backend.py``) names it.
- ``rules.py``: the search's rules stated once, which each form of the search (torch,
  compiled, and ``fconv_onnx``'s numpy) is tested against.

Layer: above the fairseq model (``models/``), below the inference core (``inference/``).
Which form of each part runs is chosen below them all, by ``fconv_plugin/backend.py``
beside ``native/``, which the int8 layers (``deployment/``) ask too.
"""
