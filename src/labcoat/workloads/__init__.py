"""Reference workloads: small, real training jobs that exercise labcoat end to end.

Each workload is a subpackage (``labcoat.workloads.tinylm``) with a library API
and a ``python -m`` entry point. Importing this package does not import torch;
only the workload modules themselves do.
"""
