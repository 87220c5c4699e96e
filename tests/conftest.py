import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The collection dask_gpu.bundle (the model, checks and spec builder) imports as ansible_collections.dask_gpu.bundle.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collections"))
