"""fairseq's ``--tokenizer moses`` gives back what was written: C++, C#, g++ and quotation marks.

sacremoses, as fairseq 0.12 calls it, splits "C++" into "C + +" and leaves the spaces it put
inside »…«, «…» and „…“; every command that tokenises with it (fairseq-interactive,
training's ``--eval-bleu-detok moses``, the examples' text) then writes them so. Its encode
and decode are the inference core's (``inference/text_codec.py``: ``moses_encode``,
``moses_decode``, over ``fconv_onnx/moses_round_trip.py``'s rule), so fairseq's commands,
fconv-translate, fconv-serve and the ONNX runtime read and write text alike.
"""

from fairseq.data.encoders import moses_tokenizer

from ..inference.text_codec import moses_decode, moses_encode
from ._patching import patch


def _replaced_by(function):
    def make_method(original):
        def method(self, text):
            return function(self, text)

        return method

    return make_method


def install() -> None:
    patch(moses_tokenizer.MosesTokenizer, "encode", "moses_round_trip", _replaced_by(moses_encode))
    patch(moses_tokenizer.MosesTokenizer, "decode", "moses_round_trip", _replaced_by(moses_decode))
