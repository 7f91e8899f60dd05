"""The ingest service starts without the document, image and OCR libraries: they load on use."""

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


def test_reading_a_pdf_loads_its_parser_then() -> None:
    probe = (
        "import json, sys, tempfile, pathlib\n"
        "from chatseek_ingest import extract\n"
        "path = pathlib.Path(tempfile.mkdtemp()) / 'a.pdf'\n"
        "path.write_bytes(b'%PDF-1.4 not really')\n"
        "try:\n"
        "    extract._read_pdf(path, extract.Limits())\n"
        "except Exception:\n"
        "    pass\n"
        "print(json.dumps('pypdf' in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) is True
