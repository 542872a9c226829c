import warnings

import pytest
import torch

# fairseq's reference model uses torch's deprecated weight_norm; keep test output readable.
warnings.filterwarnings("ignore", category=FutureWarning)


@pytest.fixture(autouse=True)
def _deterministic_threads():
    torch.manual_seed(0)
    yield
