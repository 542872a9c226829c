"""fconv_plugin: ConvS2S (Gehring et al. 2017) as a fairseq plugin.

Load it with ``--user-dir fconv_plugin`` (or the installed package's directory); it
registers its model under fairseq's fconv names and installs the host fixes in
``fconv_plugin.compat``.
"""

from . import compat
from .errors import FConvError
from .models import ARCHITECTURES, FConvDecoder, FConvEncoder, FConvModel

compat.install()

__version__ = "0.1.0"
__all__ = ["ARCHITECTURES", "FConvDecoder", "FConvEncoder", "FConvError", "FConvModel"]
