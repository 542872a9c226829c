"""Run a ConvS2S model exported by ``fconv-export`` with onnxruntime, numpy, sacremoses
and subword-nmt only: no torch, no fairseq (nothing here imports them).

    fconv-onnx-translate exported/ --beam 5 < source.txt > translations.txt
"""
