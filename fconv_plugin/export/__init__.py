"""The model in ONNX: graphs.py (the encoder and one incremental decoder step as graphs),
plain_layers.py (the layers in the operations ONNX has), main.py (``fconv-export``)."""
