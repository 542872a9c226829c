"""fconv_plugin: ConvS2S (Gehring et al. 2017) as a fairseq plugin.

Importing it registers its model under fairseq's fconv names. Loaded through
fairseq's ``--user-dir`` it also installs the host fixes in ``fconv_plugin.compat``
(other programs call ``fconv_plugin.compat.install()`` if they want them).
"""

from . import compat
from .errors import FConvError
from .models import ARCHITECTURES, FConvDecoder, FConvEncoder, FConvModel

if compat.running_fairseq_command():  # fairseq's --user-dir in fairseq-train & co.
    compat.install()

__version__ = "0.1.0"
__all__ = ["ARCHITECTURES", "FConvDecoder", "FConvEncoder", "FConvError", "FConvModel"]
