import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
SHARED_DATA = ROOT.parent / "shared" / "datasets"
if "EVALKIT_DATA" not in os.environ and SHARED_DATA.exists():
    os.environ["EVALKIT_DATA"] = str(SHARED_DATA)
