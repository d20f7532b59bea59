"""Callbacks that bring labcoat to the training loops researchers already use.

    from labcoat.integrations.transformers import LabcoatCallback   # Hugging Face Trainer
    from labcoat.integrations.lightning import LabcoatCallback      # Lightning

Each module imports its library (an extra: ``labcoat[hf]``, ``labcoat[lightning]``);
this package imports neither, so importing it costs nothing. Both callbacks record
the run, journal every logged metric, attach the guard (`labcoat.torch.watch`),
seal every checkpoint the library writes and resume from the newest one that
verifies; `_common` holds what they share. They import torch, the SDK and
`labcoat.torch`, never the store: a trial only journals.
"""

__all__: list[str] = []
