"""fairseq-train, with forward hooks on every worker's model: the dtypes that its encoder's
output projection, its decoder's last convolution and its output projection computed in go to
$FCONV_TEST_DTYPES/rank<N> (tests/cli/test_distributed.py runs it under torchrun)."""

import os
import sys
from pathlib import Path

from fairseq_cli import train  # first: it sets the log's format, as fairseq-train does

from fairseq import trainer as fairseq_trainer  # noqa: E402

_trainer_init = fairseq_trainer.Trainer.__init__


def _watching(self, cfg, task, model, criterion, *args, **kwargs):
    out = Path(os.environ["FCONV_TEST_DTYPES"]) / f"rank{os.environ.get('RANK', '0')}"

    def record(module, inputs, output):
        with out.open("a") as file:
            file.write(f"{output.dtype}\n")

    for layer in (model.encoder.fc2, model.decoder.convolutions[-1], model.decoder.fc2):
        layer.register_forward_hook(record)
    _trainer_init(self, cfg, task, model, criterion, *args, **kwargs)


fairseq_trainer.Trainer.__init__ = _watching

if __name__ == "__main__":
    sys.exit(train.cli_main())
