"""Make fairseq's ``fconv`` names build this plugin's classes.

fairseq registers ``fconv`` and its architectures itself, before any ``--user-dir``
is imported, and its decorators either hand back fairseq's class or refuse a
duplicate. So the plugin removes fairseq's entries for the model and its
architectures here, in one place, registers its own through fairseq's functions,
and says so once in the log.
"""

import logging
from typing import Callable, Dict

from fairseq import models as fairseq_models

logger = logging.getLogger(__name__)


def take_over_model(name: str, model_cls, architectures: Dict[str, Callable]) -> None:
    """Register ``model_cls`` as ``name`` with ``architectures``, replacing what is there."""
    if fairseq_models.MODEL_REGISTRY.get(name) is model_cls:
        return
    replaced = fairseq_models.MODEL_REGISTRY.pop(name, None)
    old_archs = fairseq_models.ARCH_MODEL_INV_REGISTRY.pop(name, [])
    for arch in set(old_archs) | set(architectures):
        fairseq_models.ARCH_MODEL_REGISTRY.pop(arch, None)
        fairseq_models.ARCH_MODEL_NAME_REGISTRY.pop(arch, None)
        fairseq_models.ARCH_CONFIG_REGISTRY.pop(arch, None)

    fairseq_models.register_model(name)(model_cls)
    for arch, fill_defaults in architectures.items():
        fairseq_models.register_model_architecture(name, arch)(fill_defaults)

    if replaced is not None:
        logger.info(
            "fconv_plugin: replaced %s.%s with %s.%s for --arch %s",
            replaced.__module__, replaced.__name__, model_cls.__module__, model_cls.__name__,
            ", ".join(architectures),
        )
