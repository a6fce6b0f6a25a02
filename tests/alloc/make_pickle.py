"""Write snapshot.pickle from snapshot.json the way torch.cuda.memory._dump_snapshot() writes a
snapshot: pickle.dump() of the dict, Python's default protocol (4 on Python 3.8 to 3.13).
Run with any python3 (no torch needed): python3 tests/alloc/make_pickle.py"""
import json
import pickle
from pathlib import Path

here = Path(__file__).resolve().parent
doc = json.loads((here / "snapshot.json").read_text())
doc["segments"][0]["segment_pool_id"] = (0, 0)  # tuples, as PyTorch writes them
with open(here / "snapshot.pickle", "wb") as f:
    pickle.dump(doc, f, protocol=4)
