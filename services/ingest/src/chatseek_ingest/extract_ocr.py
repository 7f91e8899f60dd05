"""Reading text off images: macOS Vision where it is importable, Tesseract (``rus+eng``) else.

Invariants:
* An image is opened header-first and refused before any pixel is decoded when it has more
  pixels than the caller's cap; Pillow's own bomb guard (``Image.MAX_IMAGE_PIXELS``, set here
  process-wide, its warning raised as an error) backs that up for every other caller.
* Recognition asks only for Russian and English, narrowed to what the engine has installed.
* Tesseract runs as a subprocess killed after the caller's time limit.
* Recognised text is returned raw; the caller cleans and caps it.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import shutil
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "ENGINE_TESSERACT",
    "ENGINE_VISION",
    "ImageRefused",
    "MAX_IMAGE_PIXELS",
    "OcrError",
    "ocr_engine",
    "ocr_image",
    "open_image",
]

log = logging.getLogger(__name__)

MAX_IMAGE_PIXELS = 40_000_000
ENGINE_VISION = "vision"
ENGINE_TESSERACT = "tesseract"
TESSERACT_LANGS = ("rus", "eng")
VISION_LANGS = ("ru-RU", "en-US")
OCR_MODE = "L"

_tesseract_langs_cache: dict[str, tuple[str, ...]] = {}


@functools.cache
def _pillow() -> ModuleType:
    """``PIL.Image``, imported on first use and capped before any image is opened.

    Pillow, pytesseract (with numpy) and the document parsers cost the ingest service about
    45 MiB and a third of a second of start-up; an import of an export without media needs
    none of them.
    """
    from PIL import Image

    # Pillow raises DecompressionBombError above twice this and only warns between once and
    # twice; the warning is made an error so no image past the cap is ever decoded here.
    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    warnings.filterwarnings("error", category=Image.DecompressionBombWarning)
    return Image


def _pytesseract() -> Any:
    import pytesseract

    return pytesseract


class ImageRefused(Exception):
    """The file is not an image Pillow can open, or it is one too large to decode safely."""


class OcrError(Exception):
    """The OCR engine failed or ran past its time limit on an image it was given."""


# --- engines ---


def _vision_importable() -> bool:
    if sys.platform != "darwin":
        return False
    try:
        return importlib.util.find_spec("Vision") is not None
    except (ImportError, ValueError):
        return False


def _tesseract_langs() -> tuple[str, ...]:
    """The wanted Tesseract languages installed here, in order; empty without Tesseract."""
    pytesseract = _pytesseract()
    cmd = str(pytesseract.pytesseract.tesseract_cmd)
    cached = _tesseract_langs_cache.get(cmd)
    if cached is not None:
        return cached
    if shutil.which(cmd) is None:
        return ()
    try:
        installed = set(pytesseract.get_languages(config=""))
    except (pytesseract.TesseractError, OSError, RuntimeError) as exc:
        log.warning("tesseract is installed but cannot list its languages: %s", exc)
        return ()
    langs = tuple(lang for lang in TESSERACT_LANGS if lang in installed)
    if langs:
        _tesseract_langs_cache[cmd] = langs
    else:
        log.warning("tesseract has neither Russian nor English data installed")
    return langs


def ocr_engine() -> str | None:
    """The OCR engine this process would use: ``"vision"``, ``"tesseract"`` or None.

    Vision is chosen on macOS when ``pyobjc-framework-Vision`` is importable; otherwise
    Tesseract when its binary is on the path with Russian or English data; otherwise None
    (photos are then settled as having no extractor).
    """
    if _vision_importable():
        return ENGINE_VISION
    if _tesseract_langs():
        return ENGINE_TESSERACT
    return None


# --- images ---


def open_image(path: Path, *, max_pixels: int) -> Image.Image:
    """Open ``path`` and decode it for OCR, refusing anything above ``max_pixels`` first.

    Returns:
        The decoded image, upright per its EXIF orientation, in greyscale.

    Raises:
        ImageRefused: not an image Pillow can read, or more pixels than allowed (the size is
            read from the header, so a bomb is refused without being allocated).
    """
    from PIL import ImageOps, UnidentifiedImageError

    Image = _pillow()  # noqa: N806 - the module, named as everywhere
    try:
        image = Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageRefused(f"decompression bomb refused: {exc}") from exc
    except UnidentifiedImageError as exc:
        raise ImageRefused("not an image format Pillow can read") from exc
    try:
        width, height = image.size
        if width * height > max_pixels:
            raise ImageRefused(
                f"decompression bomb refused: {width}x{height} is {width * height} pixels,"
                f" above the cap of {max_pixels}"
            )
        image.load()
        upright = ImageOps.exif_transpose(image) or image
        return upright.convert(OCR_MODE)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageRefused(f"decompression bomb refused: {exc}") from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageRefused(f"the image cannot be decoded: {exc}") from exc
    finally:
        image.close()


def ocr_image(path: Path, *, max_pixels: int, timeout_s: float) -> str:
    """Recognise the text of the image at ``path`` with the engine ``ocr_engine`` picks.

    Args:
        path: a local image file (any format Pillow reads).
        max_pixels: images with more pixels are refused before decoding.
        timeout_s: Tesseract is killed after this many seconds (Vision has no such switch).

    Returns:
        The raw recognised text, lines separated by newlines; ``""`` for an image without text.

    Raises:
        ImageRefused: see ``open_image``.
        OcrError: no engine here, the engine failed, or it ran past ``timeout_s``.
    """
    engine = ocr_engine()
    if engine is None:
        raise OcrError("no OCR engine is installed")
    image = open_image(path, max_pixels=max_pixels)
    try:
        if engine == ENGINE_VISION:
            return _ocr_vision(path)
        return _ocr_tesseract(image, timeout_s)
    finally:
        image.close()


def _ocr_tesseract(image: Image.Image, timeout_s: float) -> str:
    langs = "+".join(_tesseract_langs())
    pytesseract = _pytesseract()
    try:
        text: Any = pytesseract.image_to_string(image, lang=langs, timeout=timeout_s)
    except RuntimeError as exc:
        if "timeout" in str(exc).lower():
            raise OcrError(f"OCR ran past the time limit of {timeout_s:g} s") from exc
        raise OcrError(f"tesseract failed: {exc}") from exc
    except (pytesseract.TesseractError, OSError) as exc:
        raise OcrError(f"tesseract failed: {exc}") from exc
    return str(text)


def _ocr_vision(path: Path) -> str:
    """Recognise text with the Vision framework (macOS; imported only here)."""
    import Vision
    from Foundation import NSURL

    url = NSURL.fileURLWithPath_(str(path))
    handler = Vision.VNImageRequestHandler.alloc().initWithURL_options_(url, None)
    request = Vision.VNRecognizeTextRequest.alloc().init()
    request.setRecognitionLevel_(Vision.VNRequestTextRecognitionLevelAccurate)
    request.setUsesLanguageCorrection_(True)
    supported, error = request.supportedRecognitionLanguagesAndReturnError_(None)
    available = {str(lang) for lang in (supported or [])}
    langs = [lang for lang in VISION_LANGS if lang in available]
    if error is not None or not langs:
        langs = [VISION_LANGS[-1]]
    request.setRecognitionLanguages_(langs)
    ok, error = handler.performRequests_error_([request], None)
    if not ok:
        raise OcrError(f"Vision failed: {error}")
    lines: list[str] = []
    for observation in request.results() or []:
        candidates = observation.topCandidates_(1)
        if candidates:
            lines.append(str(candidates[0].string()))
    return "\n".join(lines)
