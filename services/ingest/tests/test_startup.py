"""The ingest service starts without the document, image and OCR libraries: they load on use
(the extraction tests read real PDF, DOCX and image files through them)."""

from __future__ import annotations

import json
import subprocess
import sys

ON_USE = ("pypdf", "docx", "pytesseract", "numpy")


def test_starting_the_service_loads_no_document_or_ocr_library() -> None:
    probe = (
        "import json, sys; import chatseek_ingest.__main__, chatseek_ingest.server;"
        f" print(json.dumps([m for m in {list(ON_USE)!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
