"""Checks an uploaded file before any work is done on it.

The type comes from the content, never from the name alone (OWASP File Upload
Cheat Sheet): the extension must be on the allowlist *and* the bytes must be
that kind of file. XLSX and DOCX are zip archives, so their declared
uncompressed sizes are checked from the central directory before anything
inflates them (check 9 in docs/architecture.md: that check alone cut peak memory of a
1 GB bomb from 530 MB to 12 MB). Python's zipfile never inflates an entry past
its declared size, so the declared sizes are a real bound.

Nothing here parses document content: that happens in the sandboxed child.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO

from datasets.extraction.errors import FileRejected

ALLOWED_EXTENSIONS = {
    "pdf": "pdf",
    "xlsx": "xlsx",
    "xls": "xls",
    "csv": "csv",
    "md": "md",
    "markdown": "md",
    "docx": "docx",
}
ACCEPT_ATTRIBUTE = ".pdf,.xlsx,.xls,.md,.csv,.docx"
TYPE_LABELS = {
    "pdf": "PDF",
    "xlsx": "Excel workbook",
    "xls": "Excel 97-2003 workbook",
    "csv": "CSV file",
    "md": "Markdown file",
    "docx": "Word document",
}

# Archive limits. A real 10 MB workbook or document unpacks to well under these.
MAX_ARCHIVE_ENTRIES = 5_000
MAX_UNCOMPRESSED_BYTES = 150_000_000
MAX_XML_PART_BYTES = 60_000_000
# Deflate tops out near 1000:1 on repeated bytes; real sheet XML stays far below
# this ratio once an entry is big enough to matter.
MAX_RATIO = 150
RATIO_CHECK_FROM_BYTES = 5_000_000

OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ZIP_MAGIC = b"PK\x03\x04"
BINARY_MAGICS = {
    b"MZ": "a Windows program",
    b"\x7fELF": "a program",
    ZIP_MAGIC: "a zip archive",
    OLE2_MAGIC: "an Office 97-2003 file",
    b"%PDF-": "a PDF",
    b"\x89PNG": "an image",
    b"\xff\xd8\xff": "an image",
    b"GIF8": "an image",
}
WINDOWS_RESERVED = {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(10)} | {f"lpt{i}" for i in range(10)}


@dataclass(frozen=True)
class ValidatedFile:
    file_type: str  # a Document.FileType value
    original_name: str  # sanitised, for display and downloads only; never a path
    size: int
    sha256: str


def validate_file(name: str, stream: IO[bytes], size: int, *, max_bytes: int) -> ValidatedFile:
    """Check an upload (or a stored document) and say what it is; raises FileRejected."""
    if size == 0:
        raise FileRejected("The submitted file is empty.")
    if size > max_bytes:
        raise FileRejected(too_big_message(size, max_bytes))
    extension = _extension(name)
    head = _read_head(stream)
    file_type = _sniff(extension, head, stream)
    if file_type in ("xlsx", "docx"):
        check_archive(stream, file_type)
    elif file_type in ("csv", "md"):
        check_text(stream)
    return ValidatedFile(
        file_type=file_type,
        original_name=sanitize_filename(name, default_extension=extension),
        size=size,
        sha256=sha256_of(stream),
    )


def too_big_message(size: int, max_bytes: int) -> str:
    return f"The file is {size / 1_000_000:.1f} MB; the limit is {max_bytes / 1_000_000:g} MB."


def sha256_of(stream: IO[bytes]) -> str:
    digest = hashlib.sha256()
    stream.seek(0)
    for block in iter(lambda: stream.read(1 << 20), b""):
        digest.update(block)
    stream.seek(0)
    return digest.hexdigest()


def _extension(name: str) -> str:
    suffix = PurePosixPath(name.replace("\\", "/")).suffix.lower().lstrip(".")
    if suffix not in ALLOWED_EXTENSIONS:
        shown = f".{suffix} files are" if suffix and len(suffix) <= 10 and suffix.isalnum() else "This kind of file is"
        raise FileRejected(f"{shown} not supported. Upload a PDF, XLSX, XLS, Markdown, CSV or DOCX file.")
    return suffix


def _read_head(stream: IO[bytes]) -> bytes:
    stream.seek(0)
    head = stream.read(2048)
    stream.seek(0)
    return head


def _sniff(extension: str, head: bytes, stream: IO[bytes]) -> str:
    """The file's real type, which must agree with its extension."""
    claimed = ALLOWED_EXTENSIONS[extension]
    label = TYPE_LABELS[claimed]
    if claimed == "pdf":
        # The PDF spec lets the header start anywhere in the first 1024 bytes.
        if b"%PDF-" not in head[:1024]:
            raise FileRejected(f"The file is named .pdf but it is not a PDF{_looks_like(head)}.")
        return "pdf"
    if claimed in ("xlsx", "xls") and head.startswith(OLE2_MAGIC):
        if claimed == "xlsx" or _ole_is_encrypted_ooxml(stream):
            raise FileRejected(
                "The workbook is password-protected. Remove the password in Excel (File > Info > Protect "
                "Workbook) and upload it again."
            )
        return "xls"
    if claimed == "docx" and head.startswith(OLE2_MAGIC):
        raise FileRejected(
            "The document is password-protected or an old .doc file. "
            "Save it as an unprotected .docx and upload it again."
        )
    if claimed in ("xlsx", "xls", "docx"):
        if not head.startswith(ZIP_MAGIC):
            raise FileRejected(f"The file is named .{extension} but it is not {_article(label)}{_looks_like(head)}.")
        # Spreadsheets saved as .xls that really are .xlsx are common; believe the content.
        return _ooxml_kind(stream, claimed, extension)
    return claimed  # csv / md: checked as text by check_text


def _ooxml_kind(stream: IO[bytes], claimed: str, extension: str) -> str:
    names = set(_zip_names(stream))
    if "[Content_Types].xml" in names and "xl/workbook.xml" in names and claimed in ("xlsx", "xls"):
        return "xlsx"
    if "[Content_Types].xml" in names and "word/document.xml" in names and claimed == "docx":
        return "docx"
    what = "an Excel workbook" if claimed in ("xlsx", "xls") else "a Word document"
    raise FileRejected(f"The file is named .{extension} but it is a zip archive, not {what}.")


def _zip_names(stream: IO[bytes]) -> list[str]:
    try:
        with zipfile.ZipFile(stream) as archive:
            return [info.filename for info in _entries(archive)]
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise FileRejected("The file is damaged: its zip structure cannot be read. Save it again and retry.") from exc
    finally:
        stream.seek(0)


def _entries(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    infos = archive.infolist()
    if len(infos) > MAX_ARCHIVE_ENTRIES:
        raise FileRejected(f"The file holds more than {MAX_ARCHIVE_ENTRIES:,} parts; it is not a normal Office file.")
    return infos


def check_archive(stream: IO[bytes], file_type: str) -> None:
    """Refuse zip bombs from the declared sizes in the central directory, before inflating anything."""
    try:
        with zipfile.ZipFile(stream) as archive:
            infos = _entries(archive)
            _check_sizes(infos)
            _check_xml_prologs(archive, infos)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
        raise FileRejected("The file is damaged: its zip structure cannot be read. Save it again and retry.") from exc
    finally:
        stream.seek(0)


def _check_xml_prologs(archive: zipfile.ZipFile, infos: Iterable[zipfile.ZipInfo]) -> None:
    """Office never writes a DOCTYPE; one in a part is an XXE or entity-bomb attempt.

    The parsers are hardened too (defusedxml for openpyxl, resolve_entities=False for
    python-docx); this refuses such files up front with a clear reason. A DOCTYPE must
    come before the root element, so the first few KB of each part are enough.
    """
    for info in infos:
        if not info.filename.endswith((".xml", ".rels", ".vml")):
            continue
        with archive.open(info) as part:
            head = part.read(8192)
        if b"<!DOCTYPE" in head or b"<!ENTITY" in head:
            raise FileRejected(
                "The file contains XML entity declarations, which Office never writes and attacks use, "
                "so it was not opened. Save it again from Excel or Word."
            )


def _check_sizes(infos: Iterable[zipfile.ZipInfo]) -> None:
    bomb = (
        "The file unpacks to far more data than a normal Office file ({detail}); it looks like a zip bomb "
        "and was not opened. Save it again from Excel or Word and upload the new copy."
    )
    total = 0
    for info in infos:
        if info.flag_bits & 0x1:
            raise FileRejected("The file is encrypted. Remove the password and upload it again.")
        total += info.file_size
        if total > MAX_UNCOMPRESSED_BYTES:
            raise FileRejected(bomb.format(detail=f"over {MAX_UNCOMPRESSED_BYTES // 1_000_000} MB"))
        if info.filename.endswith((".xml", ".rels")) and info.file_size > MAX_XML_PART_BYTES:
            raise FileRejected(bomb.format(detail=f"one part is {info.file_size / 1_000_000:.0f} MB"))
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_CHECK_FROM_BYTES and ratio > MAX_RATIO:
            raise FileRejected(bomb.format(detail=f"a part compressed {ratio:.0f} to 1"))


# Bytes that text never holds (tab, line feed, carriage return and form feed are text).
_CONTROL_BYTES = [byte for byte in range(1, 32) if byte not in (9, 10, 12, 13, 26)]  # 26: DOS end of file


def check_text(stream: IO[bytes]) -> None:
    """CSV and Markdown must be text (a few stray NUL bytes allowed), not some binary format renamed."""
    head = _read_head(stream)
    for magic, what in BINARY_MAGICS.items():
        if head.startswith(magic):
            raise FileRejected(f"The file is named as text but it is {what}.")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        # Excel's "Unicode Text" and some exports: text, but not the binary file the check below would call it.
        raise FileRejected(
            "The file is saved as UTF-16 (“Unicode Text”). Save it as “CSV UTF-8” or as UTF-8 text and upload it again."
        )
    stream.seek(0)
    # A few NUL bytes in real text (a broken export) are stripped by the reader with a
    # warning; a file where NULs or other control bytes are common is binary, whatever its name.
    total = nuls = controls = 0
    for block in iter(lambda: stream.read(1 << 20), b""):
        total += len(block)
        nuls += block.count(b"\x00")
        controls += sum(block.count(bytes([byte])) for byte in _CONTROL_BYTES)
    stream.seek(0)
    if nuls * 10 > total or controls * 100 > total:
        raise FileRejected("The file is not a text file (it contains binary data).")


def _ole_is_encrypted_ooxml(stream: IO[bytes]) -> bool:
    # An encrypted .xlsx is an OLE2 container with an "EncryptionInfo" stream; a real
    # .xls has a "Workbook" stream. The names are stored in UTF-16 in the directory.
    stream.seek(0)
    data = stream.read(1 << 20)
    stream.seek(0)
    return "EncryptionInfo".encode("utf-16-le") in data and "Workbook".encode("utf-16-le") not in data


def _looks_like(head: bytes) -> str:
    for magic, what in BINARY_MAGICS.items():
        if head.startswith(magic):
            return f" (it looks like {what})"
    return ""


def _article(label: str) -> str:
    return f"an {label}" if label[0].lower() in "aeiou" else f"a {label}"


def sanitize_filename(name: str, *, default_extension: str = "") -> str:
    """A display name safe for headers and pages: no paths, controls, reserved names; at most 120 chars.

    Stored files never use it (their names are random, see datasets.models._document_path).
    """
    name = unicodedata.normalize("NFC", name)
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")  # controls, NUL, CR, LF
    name = re.sub(r'[<>:"|?*]', "_", name)
    name = re.sub(r"\s+", " ", name).strip()
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    stem, ext = stem.strip(" ."), re.sub(r"[^\w]", "", ext)
    if stem.lower() in WINDOWS_RESERVED or not stem.strip(" ._-"):
        stem = f"document{'-' + stem if stem.strip(' ._-') else ''}"
    ext = ext[:10] or default_extension
    stem = stem[: 120 - len(ext) - 1].rstrip(" .")
    return f"{stem}.{ext}" if ext else stem
