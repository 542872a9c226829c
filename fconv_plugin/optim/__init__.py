"""Training by the clock: ``--lr-scheduler time_budget --budget-minutes N``.

``budget_plan.py`` is the plan (the updates a budget buys, the learning rate over them),
knowing nothing of fairseq; ``time_budget.py`` registers it as fairseq's scheduler, as
``import fconv_plugin`` (fairseq's ``--user-dir``) does the model.
"""

from . import time_budget  # noqa: F401  (registers --lr-scheduler time_budget)
