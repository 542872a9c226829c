"""The inference core: a trained model, text in, translations out.

One layer between the fairseq model (``fconv_plugin.models``) and the faces that run it
(``fconv-translate``, ``fconv-serve``, ``fconv-attention``, ``fconv-unk-dict``, the
export's checks). It imports neither the faces nor the host fixes (``compat``).

    from fconv_plugin.inference import Translator
    translator = Translator.from_pretrained("checkpoints/checkpoint_best.pt", "data-bin",
                                            tokenizer="moses", bpe="subword_nmt", bpe_codes="codes")
    translator.translate(["Y dijo Dios: Sea la luz."], beam=5)[0].text
    translator.translate_document(open("chapter.txt").read()).text

- ``translator.py``: the public face, ``Translator``, which hands each job on:
- ``loading.py``: the checkpoint (safely), task and dictionaries, device and precision;
- ``text_codec.py``: tokenizer, BPE and the dictionaries, with all unknown-word replacement;
- ``batch_session.py``: batches, generators (the search: ``fconv_plugin/decoding/``), results;
- ``workers.py``: batches decoded side by side in processes of one thread (``workers=N``);
- ``options.py``: what one translation asks (``TranslationOptions``), built once at the edge;
- ``documents.py``: documents into sentences and back, long sentences split at the cut (its one rule);
- ``attention.py``: each attention layer's weights and p_gen, by teacher forcing;
- ``results.py``: what a call returns.
"""

from .documents import SplitDocument, split_document, split_long_sentence, split_sentences, translate_document
from .results import DocumentTranslation, Hypothesis, LayerAttention, Translation
from .options import GenerationOptions, TranslationOptions
from .text_codec import CheckedSentence, load_unk_dictionary, source_token_count, unk_replaced_text
from .translator import Translator

__all__ = [
    "CheckedSentence",
    "DocumentTranslation",
    "GenerationOptions",
    "Hypothesis",
    "LayerAttention",
    "SplitDocument",
    "Translation",
    "TranslationOptions",
    "Translator",
    "load_unk_dictionary",
    "split_document",
    "split_long_sentence",
    "source_token_count",
    "split_sentences",
    "translate_document",
    "unk_replaced_text",
]
