"""Media text extraction over real PDF, DOCX and PNG files and a real migrated ingest.db."""

from __future__ import annotations

import json
import shutil
import struct
import sys
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import docx
import pytesseract
import pytest
from PIL import Image, ImageDraw, ImageFont
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

from chatseek_core import db
from chatseek_core.db import Connection
from chatseek_core.errors import Unavailable
from chatseek_ingest import extract
from chatseek_ingest.extract import (
    ExtractReport,
    FileTooLarge,
    Limits,
    MediaRow,
    Scope,
    UnsafeMediaPath,
    clean_text,
    decide,
    export_fetcher,
    extract_pending,
    read_file,
)
from chatseek_ingest.extract_ocr import ImageRefused, ocr_engine, open_image
from chatseek_ingest.schema import MIGRATIONS, OWNER

FONT_CANDIDATES = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
    Path("/usr/share/fonts/dejavu/DejaVuSans.ttf"),
    Path("/Library/Fonts/DejaVuSans.ttf"),
)
PDF_FONT = "DejaVuSans"
ACCOUNT = "me"
CHAT_ID = -1001
OCR_PHRASE = "Счёт за квартиру 2024 invoice"
BOMB_SIDE = 100_000

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="tesseract is not installed (make ocr installs it); OCR is not exercised",
)


# --- file builders ---


@pytest.fixture(scope="module")
def font() -> Path:
    """A TTF with Cyrillic glyphs, needed to render real Russian text into PDFs and images."""
    for candidate in FONT_CANDIDATES:
        if candidate.is_file():
            return candidate
    pytest.skip("no DejaVuSans.ttf found (apt-get install fonts-dejavu-core)")


def _pdf(path: Path, font: Path, pages: list[list[str]]) -> Path:
    if PDF_FONT not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont(PDF_FONT, str(font)))
    sheet = canvas.Canvas(str(path))
    for lines in pages:
        sheet.setFont(PDF_FONT, 12)
        for number, line in enumerate(lines):
            sheet.drawString(60, 760 - 16 * number, line)
        sheet.showPage()
    sheet.save()
    return path


def _docx(path: Path) -> Path:
    document = docx.Document()
    document.add_paragraph("Договор аренды квартиры")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Rent"
    table.cell(0, 1).text = "1200 EUR"
    table.cell(1, 0).text = "Депозит"
    table.cell(1, 1).text = "два месяца"
    document.add_paragraph("Signed in Tbilisi")
    document.save(str(path))
    return path


def _png_header(path: Path, width: int, height: int) -> Path:
    """A PNG that declares ``width`` x ``height`` but carries a single byte of pixel data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00")) + chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + body)
    return path


def _text_png(path: Path, font: Path, text: str) -> Path:
    image = Image.new("RGB", (1400, 160), "white")
    ImageDraw.Draw(image).text((30, 40), text, font=ImageFont.truetype(str(font), 64), fill="black")
    image.save(path)
    return path


# --- read_file ---


def test_a_two_page_pdf_gives_latin_and_cyrillic_text(tmp_path: Path, font: Path) -> None:
    path = _pdf(tmp_path / "bill.pdf", font, [["Invoice for the flat"], ["Счёт за квартиру, март"]])
    got = read_file(path, kind="document", file_name="bill.pdf", mime=None, limits=Limits())
    assert got.state == "read"
    assert got.text == "Invoice for the flat Счёт за квартиру, март"
    assert got.pages == 2


def test_a_pdf_is_recognised_by_mime_when_the_name_says_nothing(tmp_path: Path, font: Path) -> None:
    path = _pdf(tmp_path / "scan", font, [["Residence permit"]])
    got = read_file(path, kind="document", file_name=None, mime="application/pdf", limits=Limits())
    assert got.state == "read"
    assert got.text == "Residence permit"


def test_a_docx_gives_paragraphs_and_table_cells_in_reading_order(tmp_path: Path) -> None:
    got = read_file(
        _docx(tmp_path / "lease.docx"),
        kind="document",
        file_name="lease.docx",
        mime=None,
        limits=Limits(),
    )
    assert got.state == "read"
    assert got.text == (
        "Договор аренды квартиры Rent 1200 EUR Депозит два месяца Signed in Tbilisi"
    )


def test_a_long_pdf_is_capped_at_4000_chars_and_not_read_to_the_end(
    tmp_path: Path, font: Path
) -> None:
    line = "Clause about the deposit, the rent and the notice period. " * 2
    pages = [[f"Page {n}", line, line] for n in range(399)] + [["FINALPAGEMARKER"]]
    path = _pdf(tmp_path / "contract.pdf", font, pages)
    got = read_file(path, kind="document", file_name="contract.pdf", mime=None, limits=Limits())
    assert got.state == "read"
    assert got.text is not None
    assert 3900 <= len(got.text) <= 4000
    assert "FINALPAGEMARKER" not in got.text
    assert got.pages < 30


def test_a_pdf_is_read_up_to_the_page_cap(tmp_path: Path, font: Path) -> None:
    path = _pdf(tmp_path / "many.pdf", font, [[f"page{n}"] for n in range(1, 6)])
    got = read_file(
        path, kind="document", file_name="many.pdf", mime=None, limits=Limits(max_pages=3)
    )
    assert got.text == "page1 page2 page3"
    assert got.pages == 3


def test_a_corrupt_pdf_fails_with_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\n" + bytes(range(256)) * 20)
    got = read_file(path, kind="document", file_name="broken.pdf", mime=None, limits=Limits())
    assert got.state == "failed"
    assert got.text is None
    assert got.error and "pdf" in got.error.lower()


def test_a_docx_that_is_really_a_pdf_fails_as_mislabelled(tmp_path: Path, font: Path) -> None:
    pdf = _pdf(tmp_path / "real.pdf", font, [["Hello"]])
    path = tmp_path / "contract.docx"
    path.write_bytes(pdf.read_bytes())
    got = read_file(path, kind="document", file_name="contract.docx", mime=None, limits=Limits())
    assert got.state == "failed"
    assert got.error == "not a DOCX: the file is a PDF"


def test_a_pdf_that_is_really_a_png_fails_as_mislabelled(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    Image.new("RGB", (10, 10), "white").save(path, format="PNG")
    got = read_file(path, kind="document", file_name="scan.pdf", mime=None, limits=Limits())
    assert got.state == "failed"
    assert got.error == "not a PDF: the file is a PNG image"


def test_a_docx_zip_bomb_is_refused_before_opening(tmp_path: Path) -> None:
    path = tmp_path / "bomb.docx"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b" " * (20 * 1024 * 1024))
    got = read_file(path, kind="document", file_name="bomb.docx", mime=None, limits=Limits())
    assert got.state == "failed"
    assert got.error and got.error.startswith("zip bomb refused")


@pytest.mark.parametrize(
    "limits",
    [Limits(docx_max_entries=3), Limits(docx_max_uncompressed_bytes=1000)],
    ids=["entries", "total-size"],
)
def test_a_docx_above_the_zip_caps_is_refused(tmp_path: Path, limits: Limits) -> None:
    got = read_file(
        _docx(tmp_path / "lease.docx"),
        kind="document",
        file_name="lease.docx",
        mime=None,
        limits=limits,
    )
    assert got.state == "failed"
    assert got.error and got.error.startswith("zip bomb refused")


def test_a_zip_without_a_word_document_is_not_a_docx(tmp_path: Path) -> None:
    path = tmp_path / "sheet.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
    got = read_file(path, kind="document", file_name="sheet.docx", mime=None, limits=Limits())
    assert got.state == "failed"
    assert got.error == "not a DOCX: the zip holds no word/document.xml"


def test_an_empty_file_fails(tmp_path: Path) -> None:
    path = tmp_path / "empty.pdf"
    path.write_bytes(b"")
    got = read_file(path, kind="document", file_name="empty.pdf", mime=None, limits=Limits())
    assert (got.state, got.error) == ("failed", "the file is empty")


def test_a_huge_png_header_is_refused_as_a_bomb_without_decoding(tmp_path: Path) -> None:
    # Decoding 100000 x 100000 RGB would need 30 GB: returning at all shows the header decided.
    path = _png_header(tmp_path / "bomb.png", BOMB_SIDE, BOMB_SIDE)
    with pytest.raises(ImageRefused, match="decompression bomb"):
        open_image(path, max_pixels=Limits().max_image_pixels)


def test_an_image_between_the_cap_and_twice_it_is_refused_too(tmp_path: Path) -> None:
    path = _png_header(tmp_path / "wide.png", 8000, 6000)
    with pytest.raises(ImageRefused, match="decompression bomb"):
        open_image(path, max_pixels=Limits().max_image_pixels)


def test_an_image_above_a_lower_pixel_cap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "small.png"
    Image.new("RGB", (100, 100), "white").save(path)
    with pytest.raises(ImageRefused, match="10000 pixels"):
        open_image(path, max_pixels=5000)


@needs_tesseract
def test_a_photo_bomb_settles_as_failed(tmp_path: Path) -> None:
    path = _png_header(tmp_path / "bomb.png", BOMB_SIDE, BOMB_SIDE)
    got = read_file(path, kind="photo", file_name=None, mime=None, limits=Limits())
    assert got.state == "failed"
    assert got.error and "decompression bomb" in got.error


@needs_tesseract
def test_ocr_reads_russian_and_english_off_a_photo(tmp_path: Path, font: Path) -> None:
    path = _text_png(tmp_path / "photo.png", font, OCR_PHRASE)
    got = read_file(path, kind="photo", file_name=None, mime="image/png", limits=Limits())
    assert got.state == "read"
    assert got.text is not None
    text = got.text.lower()
    assert "2024" in text
    assert "invoice" in text or "квартир" in text


@needs_tesseract
def test_a_photo_without_text_is_read_with_empty_text(tmp_path: Path) -> None:
    path = tmp_path / "sky.png"
    Image.new("RGB", (400, 300), "white").save(path)
    got = read_file(path, kind="photo", file_name=None, mime=None, limits=Limits())
    assert (got.state, got.text) == ("read", "")


@pytest.mark.parametrize(
    ("kind", "file_name", "mime"),
    [
        ("video", "clip.mp4", "video/mp4"),
        ("sticker", None, "image/webp"),
        ("poll", None, None),
        ("audio", "song.mp3", "audio/mpeg"),
        ("voice", None, "audio/ogg"),
        ("document", "prices.xlsx", None),
        ("document", "app.apk", "application/vnd.android.package-archive"),
        ("document", "photo.jpg", "image/jpeg"),
    ],
)
def test_kinds_without_an_extractor_are_settled_without_reading(
    tmp_path: Path, kind: str, file_name: str | None, mime: str | None
) -> None:
    missing = tmp_path / "never-created"
    got = read_file(missing, kind=kind, file_name=file_name, mime=mime, limits=Limits())
    assert got.state == "no-extractor"
    assert got.error
    assert decide(kind, file_name, mime, 10, Limits()) == got


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS may read photos through Vision")
def test_photos_have_no_extractor_where_no_ocr_engine_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", str(tmp_path / "no-tesseract"))
    path = tmp_path / "photo.png"
    Image.new("RGB", (10, 10), "white").save(path)
    got = read_file(path, kind="photo", file_name=None, mime="image/png", limits=Limits())
    assert got.state == "no-extractor"
    assert decide("photo", None, None, 100, Limits()) == got


def test_a_file_above_the_download_cap_is_too_large_and_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.pdf"
    path.write_bytes(b"x" * 3 * 1024 * 1024)
    got = read_file(
        path, kind="document", file_name="big.pdf", mime=None, limits=Limits(max_download_mb=1)
    )
    assert got.state == "too-large"
    assert decide("document", "big.pdf", None, 3 * 1024 * 1024, Limits(max_download_mb=1)) == got


@pytest.mark.parametrize(
    ("limits", "photo", "pdf"),
    [
        (Limits(enabled=False), "disabled", "disabled"),
        (Limits(ocr=False), "disabled", None),
        (Limits(documents=False), None, "disabled"),
    ],
    ids=["all-off", "ocr-off", "documents-off"],
)
def test_switches_settle_their_kinds_as_disabled(
    limits: Limits, photo: str | None, pdf: str | None
) -> None:
    photo_got = decide("photo", None, "image/jpeg", 100, limits)
    pdf_got = decide("document", "a.pdf", None, 100, limits)
    assert (pdf_got.state if pdf_got else None) == pdf
    if photo == "disabled":
        assert photo_got is not None and photo_got.state == "disabled"
    else:
        assert photo_got is None or photo_got.state != "disabled"
    assert decide("video", "v.mp4", None, 100, limits) == decide(
        "video", "v.mp4", None, 1, Limits()
    )


def test_clean_text_folds_whitespace_and_drops_control_characters() -> None:
    assert clean_text("  a\x00b\u200b c\n\n\t d\x07\u00ad e\r\n") == "ab c d e"


# --- export_fetcher ---


def _row(mid: int = 1, *, export_path: str | None = None, **kw: object) -> MediaRow:
    fields: dict[str, object] = {
        "mid": mid,
        "account": ACCOUNT,
        "chat_id": CHAT_ID,
        "msg_id": mid,
        "kind": "document",
        "file_name": "a.pdf",
        "mime": None,
        "size": None,
        "extra": {"export_path": export_path} if export_path is not None else {},
    }
    fields.update(kw)
    return MediaRow(**fields)  # type: ignore[arg-type]


def test_export_fetcher_gives_files_inside_the_export_only(tmp_path: Path) -> None:
    root = tmp_path / "export"
    (root / "files").mkdir(parents=True)
    (root / "files" / "a.pdf").write_bytes(b"%PDF-1.4")
    (root / "files" / "link.pdf").symlink_to(root / "files" / "a.pdf")
    secret = tmp_path / "secret.pdf"
    secret.write_bytes(b"%PDF-1.4 secret")
    (root / "files" / "escape.pdf").symlink_to(secret)
    fetch = export_fetcher(root)
    scratch = tmp_path / "scratch"

    assert fetch(_row(export_path="files/a.pdf"), scratch) == (root / "files" / "a.pdf").resolve()
    assert fetch(_row(export_path="files/link.pdf"), scratch) == (root / "files/a.pdf").resolve()
    assert fetch(_row(export_path="files/not-included.pdf"), scratch) is None
    assert fetch(_row(), scratch) is None
    for bad in ("../secret.pdf", "files/../../secret.pdf", str(secret), "files/escape.pdf"):
        with pytest.raises(UnsafeMediaPath):
            fetch(_row(export_path=bad), scratch)
    with pytest.raises(UnsafeMediaPath):
        fetch(_row(export_path="files"), scratch)


# --- extract_pending over a real ingest.db ---


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[Connection]:
    """A real ingest.db migrated with the service's own migrations, with one account and chat."""
    connection = db.connect(tmp_path / "data" / "ingest.db")
    db.migrate(connection, OWNER, MIGRATIONS)
    with db.transaction(connection):
        connection.execute("INSERT INTO accounts (account, is_active) VALUES (?, 1)", (ACCOUNT,))
        connection.execute(
            "INSERT INTO chats (account, chat_id, type, title) VALUES (?, ?, 'group', 'Flat')",
            (ACCOUNT, CHAT_ID),
        )
    yield connection
    connection.close()


def _add_media(
    conn: Connection,
    msg_id: int,
    kind: str,
    file_name: str | None = None,
    *,
    export_path: str | None = None,
    size: int | None = None,
) -> int:
    with db.transaction(conn):
        mid = conn.execute(
            "INSERT INTO messages (account, chat_id, msg_id, date, text) VALUES (?, ?, ?, ?, '')",
            (ACCOUNT, CHAT_ID, msg_id, 1_700_000_000 + msg_id * 60),
        ).lastrowid
        extra = json.dumps({"export_path": export_path}) if export_path else None
        conn.execute(
            "INSERT INTO media (mid, kind, file_name, size, extra) VALUES (?, ?, ?, ?, ?)",
            (mid, kind, file_name, size, extra),
        )
    assert mid is not None
    return int(mid)


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS may read photos through Vision")
def test_a_pass_asks_for_the_ocr_engine_once_and_settles_every_photo_by_its_answer(
    conn: Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", str(tmp_path / "no-tesseract"))
    asked: list[str | None] = []

    def probe() -> str | None:
        asked.append(ocr_engine())  # the real probe, counted
        return asked[-1]

    monkeypatch.setattr(extract, "ocr_engine", probe)
    for msg_id in range(1, 6):
        _add_media(conn, msg_id, "photo", export_path=f"photos/{msg_id}.jpg")
    report = extract_pending(conn, fetch=export_fetcher(tmp_path), batch_size=2)
    assert asked == [None]
    assert report.counts == {"no-extractor": 5}
    assert set(_states(conn).values()) == {"no-extractor"}


def _states(conn: Connection) -> dict[int, str]:
    cur = conn.execute(
        "SELECT m.msg_id, media.extract_state FROM media JOIN messages m USING (mid)"
    )
    return {int(r[0]): str(r[1]) for r in cur}


def _text(conn: Connection, msg_id: int) -> str | None:
    row = conn.execute(
        "SELECT extracted_text FROM media JOIN messages m USING (mid) WHERE m.msg_id = ?",
        (msg_id,),
    ).fetchone()
    return None if row[0] is None else str(row[0])


def _announced(conn: Connection) -> list[int]:
    return [int(r[0]) for r in conn.execute("SELECT entity FROM _feed ORDER BY seq")]


@pytest.fixture
def export(tmp_path: Path, font: Path) -> Path:
    """An export folder holding a PDF, a DOCX and a corrupt PDF, as an import would leave it."""
    root = tmp_path / "export"
    files = root / "files"
    files.mkdir(parents=True)
    _pdf(files / "bill.pdf", font, [["Invoice for the flat"], ["Счёт за квартиру"]])
    _docx(files / "lease.docx")
    (files / "broken.pdf").write_bytes(b"%PDF-1.4\n" + bytes(range(256)) * 8)
    return root


def _fill(conn: Connection) -> None:
    _add_media(conn, 1, "document", "bill.pdf", export_path="files/bill.pdf")
    _add_media(conn, 2, "document", "lease.docx", export_path="files/lease.docx")
    _add_media(conn, 3, "sticker")
    _add_media(conn, 4, "document", "prices.xlsx", export_path="files/prices.xlsx")
    _add_media(conn, 5, "document", "gone.pdf")
    _add_media(conn, 6, "document", "broken.pdf", export_path="files/broken.pdf")


def test_a_pass_settles_every_row_and_announces_extracted_text(
    conn: Connection, export: Path
) -> None:
    _fill(conn)
    progress: list[tuple[int, int]] = []
    report = extract_pending(
        conn, fetch=export_fetcher(export), on_progress=lambda d, t: progress.append((d, t))
    )
    assert report == ExtractReport(
        counts={"read": 2, "no-extractor": 2, "failed": 1},
        unfetchable=1,
        requeued=0,
        remaining=0,
        stopped_by="done",
    )
    assert _states(conn) == {
        1: "read",
        2: "read",
        3: "no-extractor",
        4: "no-extractor",
        5: "pending",
        6: "failed",
    }
    assert _text(conn, 1) == "Invoice for the flat Счёт за квартиру"
    assert "Депозит" in (_text(conn, 2) or "")
    assert _announced(conn) == [1, 2]
    assert progress[-1] == (6, 6)
    assert [done for done, _ in progress] == [1, 2, 3, 4, 5, 6]


def test_a_pass_stops_at_its_budget_and_the_next_one_resumes(
    conn: Connection, export: Path
) -> None:
    _fill(conn)
    now = [0.0]
    fetched: list[int] = []
    inner = export_fetcher(export)

    def slow_fetch(row: MediaRow, tmpdir: Path) -> Path | None:
        now[0] += 10.0
        fetched.append(row.msg_id)
        return inner(row, tmpdir)

    first = extract_pending(conn, fetch=slow_fetch, budget_s=15, clock=lambda: now[0])
    assert first.stopped_by == "budget"
    assert first.counts == {"read": 2}
    assert first.remaining == 4
    assert fetched == [1, 2]

    second = extract_pending(conn, fetch=slow_fetch, clock=lambda: now[0])
    assert second.stopped_by == "done"
    assert second.counts == {"no-extractor": 2, "failed": 1}
    assert fetched == [1, 2, 5, 6]
    assert _announced(conn) == [1, 2]


def test_retry_failed_requeues_failed_and_no_extractor_rows(
    conn: Connection, export: Path, font: Path
) -> None:
    _fill(conn)
    fetch = export_fetcher(export)
    extract_pending(conn, fetch=fetch)
    _pdf(export / "files" / "broken.pdf", font, [["Repaired receipt"]])

    again = extract_pending(conn, fetch=fetch)
    assert again.counts == {}
    assert _states(conn)[6] == "failed"

    retried = extract_pending(conn, fetch=fetch, retry_failed=True)
    assert retried.requeued == 3
    assert retried.counts == {"read": 1, "no-extractor": 2}
    assert _text(conn, 6) == "Repaired receipt"
    assert _announced(conn)[-1] == 6


def test_a_file_above_the_cap_is_never_fetched(conn: Connection) -> None:
    _add_media(conn, 1, "document", "scan.pdf", export_path="files/scan.pdf", size=80 * 2**20)
    calls: list[int] = []

    def fetch(row: MediaRow, tmpdir: Path) -> Path | None:
        calls.append(row.mid)
        return None

    report = extract_pending(conn, fetch=fetch, limits=Limits(max_download_mb=20))
    assert calls == []
    assert report.counts == {"too-large": 1}
    assert _states(conn) == {1: "too-large"}


def test_a_fetch_that_learns_the_size_settles_too_large_without_downloading(
    conn: Connection, tmp_path: Path
) -> None:
    _add_media(conn, 1, "document", "scan.pdf")
    work = tmp_path / "work"
    work.mkdir()

    def fetch(row: MediaRow, tmpdir: Path) -> Path | None:
        raise FileTooLarge(90 * 2**20)

    report = extract_pending(conn, fetch=fetch, limits=Limits(max_download_mb=20), work_dir=work)
    assert report.counts == {"too-large": 1}
    error = conn.execute("SELECT extract_error FROM media").fetchone()[0]
    assert error == "90.0 MiB is above the cap of 20 MiB"
    assert list(work.iterdir()) == []


def test_switched_off_kinds_are_not_fetched_and_come_back_when_switched_on(
    conn: Connection, export: Path
) -> None:
    _add_media(conn, 1, "document", "bill.pdf", export_path="files/bill.pdf")
    calls: list[int] = []
    inner = export_fetcher(export)

    def fetch(row: MediaRow, tmpdir: Path) -> Path | None:
        calls.append(row.msg_id)
        return inner(row, tmpdir)

    off = extract_pending(conn, fetch=fetch, limits=Limits(documents=False))
    assert off.counts == {"disabled": 1}
    assert calls == []

    on = extract_pending(conn, fetch=fetch, limits=Limits())
    assert on.requeued == 1
    assert on.counts == {"read": 1}
    assert calls == [1]


def test_downloads_are_deleted_after_success_and_failure(
    conn: Connection, export: Path, tmp_path: Path
) -> None:
    _fill(conn)
    work = tmp_path / "work"
    work.mkdir()
    downloads: list[Path] = []

    def download(row: MediaRow, tmpdir: Path) -> Path | None:
        source = export / str(row.extra.get("export_path", "missing"))
        if not source.is_file():
            return None
        copy = tmpdir / f"{row.mid}-{source.name}"
        shutil.copyfile(source, copy)
        downloads.append(copy)
        return copy

    report = extract_pending(conn, fetch=download, work_dir=work)
    assert report.counts == {"read": 2, "no-extractor": 2, "failed": 1}
    assert len(downloads) == 3
    assert not any(path.exists() for path in downloads)
    assert list(work.iterdir()) == []


def test_every_fetch_gets_an_empty_directory_emptied_again_after_it(
    conn: Connection, tmp_path: Path
) -> None:
    for msg_id in (1, 2, 3):
        _add_media(conn, msg_id, "document", f"{msg_id}.pdf")
    work = tmp_path / "work"
    work.mkdir()
    seen: list[Path] = []

    def fetch(row: MediaRow, tmpdir: Path) -> Path | None:
        assert tmpdir.is_dir()
        assert list(tmpdir.iterdir()) == []
        seen.append(tmpdir)
        if row.msg_id == 2:
            (tmpdir / "left.bin").write_bytes(b"x")
            (tmpdir / "nested").mkdir()
            (tmpdir / "nested" / "part").write_bytes(b"y")
        return None

    report = extract_pending(conn, fetch=fetch, work_dir=work)
    assert report.unfetchable == 3
    assert len(seen) == 3
    assert not any(path.exists() for path in seen)
    assert list(work.iterdir()) == []


def test_a_row_changed_while_its_file_is_read_is_left_for_the_next_pass(
    conn: Connection, export: Path, tmp_path: Path
) -> None:
    _fill(conn)
    other = db.connect(tmp_path / "data" / "ingest.db")
    reading_bill = export_fetcher(export)

    def fetch(row: MediaRow, tmpdir: Path) -> Path | None:
        if row.msg_id == 1:  # a sync edits the message's media while its file is read
            with db.transaction(other):
                other.execute("UPDATE media SET size = 123 WHERE mid = ?", (row.mid,))
        return reading_bill(row, tmpdir)

    try:
        first = extract_pending(conn, fetch=fetch, batch_size=3)
    finally:
        other.close()
    assert first.counts == {"read": 1, "no-extractor": 2, "failed": 1}
    assert _states(conn)[1] == "pending" and _text(conn, 1) is None
    assert _states(conn)[2] == "read"
    second = extract_pending(conn, fetch=export_fetcher(export))
    assert second.counts == {"read": 1}
    assert _text(conn, 1) == "Invoice for the flat Счёт за квартиру"
    assert _announced(conn) == [2, 1]


def test_a_scoped_pass_reads_and_counts_only_the_chats_it_names(
    conn: Connection, export: Path
) -> None:
    mid = _add_media(conn, 1, "document", "bill.pdf", export_path="files/bill.pdf")
    with db.transaction(conn):
        conn.execute(
            "INSERT INTO chats (account, chat_id, type, title) VALUES (?, -2002, 'group', 'B')",
            (ACCOUNT,),
        )
        other = conn.execute(
            "INSERT INTO messages (account, chat_id, msg_id, date, text)"
            " VALUES (?, -2002, 1, 1, '')",
            (ACCOUNT,),
        ).lastrowid
        conn.execute(
            "INSERT INTO media (mid, kind, file_name, extra) VALUES (?, 'document', 'bill.pdf', ?)",
            (other, json.dumps({"export_path": "files/bill.pdf"})),
        )
    totals: list[int] = []

    report = extract_pending(
        conn,
        fetch=export_fetcher(export),
        scope=Scope(ACCOUNT, (CHAT_ID,)),
        on_progress=lambda done, total: totals.append(total),
    )
    assert report.counts == {"read": 1}
    assert report.remaining == 0
    assert totals == [1]
    states = dict(conn.execute("SELECT mid, extract_state FROM media").fetchall())
    assert states == {mid: "read", other: "pending"}
    assert (
        extract_pending(conn, fetch=export_fetcher(export), scope=Scope("else", (CHAT_ID,))).counts
        == {}
    )


def test_a_scoped_pass_fetches_each_row_of_its_chats_once_in_stored_order_in_small_batches(
    conn: Connection,
) -> None:
    other, outside = -2002, -2003
    with db.transaction(conn):
        for chat_id, title in ((other, "B"), (outside, "C")):
            conn.execute(
                "INSERT INTO chats (account, chat_id, type, title) VALUES (?, ?, 'group', ?)",
                (ACCOUNT, chat_id, title),
            )
        # Two chats stored interleaved, dates out of id order, a message without media after
        # each, and a chat outside the scope with a pending row of its own.
        for chat_id, msg_id, date in (
            (CHAT_ID, 5, 100), (CHAT_ID, 3, 100), (other, 2, 10), (CHAT_ID, 4, 50),
            (outside, 6, 20), (CHAT_ID, 9, 100), (other, 8, 5), (CHAT_ID, 1, 300),
            (other, 7, 10),
        ):  # fmt: skip
            mid = conn.execute(
                "INSERT INTO messages (account, chat_id, msg_id, date, text)"
                " VALUES (?, ?, ?, ?, '')",
                (ACCOUNT, chat_id, msg_id, date),
            ).lastrowid
            conn.execute(
                "INSERT INTO messages (account, chat_id, msg_id, date, text)"
                " VALUES (?, ?, ?, ?, 'no media')",
                (ACCOUNT, chat_id, 100 + msg_id, date),
            )
            conn.execute(
                "INSERT INTO media (mid, kind, file_name) VALUES (?, 'document', 'a.pdf')", (mid,)
            )
    seen: list[tuple[int, int]] = []

    def fetch(row: MediaRow, tmpdir: Path) -> Path | None:
        seen.append((row.chat_id, row.msg_id))
        return None  # unfetchable: every row stays pending while the pass goes on

    report = extract_pending(
        conn, fetch=fetch, batch_size=2, scope=Scope(ACCOUNT, (CHAT_ID, other, CHAT_ID))
    )
    assert report.unfetchable == 8
    # In mid order (the order above), each once although every row stays pending.
    assert seen == [
        (CHAT_ID, 5), (CHAT_ID, 3), (other, 2), (CHAT_ID, 4), (CHAT_ID, 9), (other, 8),
        (CHAT_ID, 1), (other, 7),
    ]  # fmt: skip
    assert report.remaining == 0


def test_a_fetch_error_fails_the_row_and_an_abort_stops_the_pass_cleanly(
    conn: Connection, tmp_path: Path
) -> None:
    _add_media(conn, 1, "document", "a.pdf")
    _add_media(conn, 2, "document", "b.pdf")
    work = tmp_path / "work"
    work.mkdir()

    def flaky(row: MediaRow, tmpdir: Path) -> Path | None:
        (tmpdir / "partial.bin").write_bytes(b"half a download")
        if row.msg_id == 1:
            raise OSError("connection reset")
        raise Unavailable("telegram is unreachable")

    with pytest.raises(Unavailable):
        extract_pending(conn, fetch=flaky, work_dir=work)
    assert _states(conn) == {1: "failed", 2: "pending"}
    error = conn.execute("SELECT extract_error FROM media WHERE mid = 1").fetchone()[0]
    assert error == "could not fetch the file: connection reset"
    assert list(work.iterdir()) == []


def test_rows_settled_without_a_file_commit_together_when_a_fetch_stops_the_pass(
    conn: Connection,
) -> None:
    for msg_id, kind in enumerate(("sticker", "sticker", "document", "sticker", "document"), 1):
        _add_media(conn, msg_id, kind, f"{msg_id}.pdf" if kind == "document" else None)
    _add_media(conn, 6, "sticker")
    commits: list[dict[int, str]] = []

    def on_commit(connection: Connection, phase: str) -> None:
        if phase == "after":
            commits.append(_states(connection))

    def fetch(row: MediaRow, tmpdir: Path) -> Path | None:
        if row.msg_id == 3:
            return None
        raise Unavailable("telegram is unreachable")

    remove = db.add_commit_hook(on_commit)
    try:
        with pytest.raises(Unavailable):
            extract_pending(conn, fetch=fetch)
    finally:
        remove()
    settled = {1: "no-extractor", 2: "no-extractor", 4: "no-extractor"}
    assert commits == [{3: "pending", 5: "pending", 6: "pending", **settled}]
    assert _states(conn) == commits[0]


def test_an_export_path_escaping_the_folder_fails_the_row_unread(
    conn: Connection, export: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside.pdf").write_bytes((export / "files" / "bill.pdf").read_bytes())
    _add_media(conn, 1, "document", "outside.pdf", export_path="../outside.pdf")
    report = extract_pending(conn, fetch=export_fetcher(export))
    assert report.counts == {"failed": 1}
    assert _text(conn, 1) is None
    error = conn.execute("SELECT extract_error FROM media").fetchone()[0]
    assert "'..'" in error
