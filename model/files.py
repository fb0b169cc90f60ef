"""The files the ``atomcube`` command reads and writes, checked before anything is allocated or
written.

Every check raises :class:`~atomcube.model.errors.FormatError` naming the argument or the file
and field, and the rule broken; the command prints it as one line and exits with status 2. The
rules:

- sizes are read from headers and checked against :data:`MAX_BYTES` before an array is read
  or an image allocated, so a bad or hostile file costs bounded time and memory;
- a sidecar or manifest is read strictly: every field present, of its type, no unknown field,
  and every field that follows from the others equal to what they give;
- an output has the suffix its kind needs, goes into a folder that exists, and is never one of
  the command's inputs; it is written whole, through a temporary file renamed into place, so a
  failure leaves nothing behind and the path printed is the path written.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .errors import FormatError

#: the largest tensor or memory image the command reads or writes (1 GiB)
MAX_BYTES = 1 << 30
#: the largest JSON sidecar or manifest it reads
MAX_JSON_BYTES = 16 << 20


def check_size(nbytes: int, field: str, what: str = "the result") -> None:
    """Refuse ``nbytes`` over :data:`MAX_BYTES`, naming ``field``."""
    if nbytes > MAX_BYTES:
        raise FormatError(field, f"{what} would be {nbytes:,} bytes, over the command's limit "
                                 f"of {MAX_BYTES:,} (1 GiB)")


def _existing_file(path: Path) -> None:
    if not path.exists():
        raise FormatError(str(path), "no such file")
    if not path.is_file():
        raise FormatError(str(path), "is not a file")


def _npy_header(f, path: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, data bytes) from an open .npy file, positioned at the data."""
    try:
        version = np.lib.format.read_magic(f)
        read = {(1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read is None:
            raise ValueError(f"version {version}")
        shape, _, dtype = read(f)
    except (ValueError, OSError, SyntaxError) as e:
        raise FormatError(str(path), f"not a readable .npy file ({e})") from None
    if dtype.hasobject:
        raise FormatError(str(path), "holds Python objects; only numeric arrays are read")
    count = math.prod(shape)
    return shape, dtype, count * dtype.itemsize


def load_array(path: Path, key: str | None = None) -> np.ndarray:
    """A numeric array from a ``.npy`` file, or one from a ``.npz`` (``key`` names it when the
    file holds several). The size is checked from the header before the data is read; a file
    whose data is short or followed by other bytes is refused."""
    path = Path(path)
    _existing_file(path)
    if path.suffix not in (".npy", ".npz"):
        raise FormatError(str(path), "expected a .npy or .npz file")
    if path.suffix == ".npy":
        if key:
            raise FormatError("--key", "only .npz files hold named arrays")
        with path.open("rb") as f:
            shape, dtype, nbytes = _npy_header(f, path)
            check_size(nbytes, str(path), "its array")
            left = path.stat().st_size - f.tell()
            if left != nbytes:
                raise FormatError(str(path), f"its header promises {nbytes:,} bytes of data, "
                                             f"the file holds {left:,}")
        return np.load(path, allow_pickle=False)
    try:
        with zipfile.ZipFile(path) as z:
            names = [n.removesuffix(".npy") for n in z.namelist()]
            if key is None:
                if len(names) != 1:
                    raise FormatError(str(path), f"holds {len(names)} arrays "
                                                 f"({', '.join(names) or 'none'}); choose one "
                                                 f"with --key")
                key = names[0]
            if key not in names:
                raise FormatError("--key", f"{path} has no array {key!r} (it has "
                                           f"{', '.join(names) or 'none'})")
            with z.open(key + ".npy") as f:
                shape, dtype, nbytes = _npy_header(f, path)
                check_size(nbytes, str(path), f"array {key!r}")
        with np.load(path, allow_pickle=False) as data:
            return data[key]
    except (zipfile.BadZipFile, EOFError, ValueError, OSError, KeyError) as e:
        if isinstance(e, FormatError):
            raise
        raise FormatError(str(path), f"not a readable .npz file ({e})") from None


def load_bytes(path: Path, size: int, what: str) -> np.ndarray:
    """The whole of ``path`` as uint8, which must be exactly ``size`` bytes (``what`` says what
    the file should hold)."""
    path = Path(path)
    _existing_file(path)
    have = path.stat().st_size
    if have != size:
        raise FormatError(str(path), f"{have:,} bytes; {what} is {size:,}")
    check_size(size, str(path))
    return np.fromfile(path, dtype=np.uint8)


def read_json(path: Path, what: str) -> dict:
    """A JSON object from ``path``; ``what`` names the file's role in messages."""
    path = Path(path)
    _existing_file(path)
    if path.stat().st_size > MAX_JSON_BYTES:
        raise FormatError(str(path), f"over {MAX_JSON_BYTES:,} bytes: not {what}")
    try:
        d = json.loads(path.read_bytes())
    except UnicodeDecodeError:
        raise FormatError(str(path), f"not text: not {what}") from None
    except json.JSONDecodeError as e:
        raise FormatError(str(path), f"not valid JSON ({e.msg}, line {e.lineno} column "
                                     f"{e.colno}): not {what}") from None
    if not isinstance(d, dict):
        raise FormatError(str(path), f"holds a JSON {type(d).__name__}, not the object "
                                     f"{what} is")
    return d


def same_json(a, b) -> bool:
    """JSON values equal in value and kind (a bool is not a number, 3.0 is not 3)."""
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return type(a) is type(b) and a == b
    return type(a) is type(b) and a == b


#: fields a record may leave out, the object's default then applying (a record without
#: ``config`` describes nv_full's format)
OPTIONAL_FIELDS = ("config",)


def from_record(cls, d: dict, where: str, extra: Iterable[str] = ()):
    """``cls.from_dict(d)``, strictly: every field ``to_dict`` writes must be there (but
    :data:`OPTIONAL_FIELDS`), no other (but ``extra``), and each must be what the object built
    from them gives back, so that a hand-edited derived field (a stride, a plane offset) is
    refused rather than ignored. ``where`` names the file in messages."""
    try:
        obj = cls.from_dict(d)
    except KeyError as e:
        raise FormatError(where, f"missing field {e.args[0]!r}") from None
    except FormatError as e:
        raise FormatError(f"{where}: {e.field}", e.rule) from None
    except (TypeError, ValueError) as e:
        raise FormatError(where, f"a field has the wrong type or value ({e})") from None
    want = obj.to_dict()
    unknown = sorted(set(d) - set(want) - set(extra))
    if unknown:
        raise FormatError(where, f"unknown field {unknown[0]!r}")
    for k, v in want.items():
        if k not in d:
            if k in OPTIONAL_FIELDS:
                continue
            raise FormatError(where, f"missing field {k!r}")
        if not same_json(d[k], v):
            raise FormatError(f"{where}: {k}", f"is {json.dumps(d[k])}, but the other fields "
                                               f"make it {json.dumps(v)}")
    return obj


def check_output(path: Path, suffix: str | None, inputs: Iterable[Path] = (),
                 field: str = "-o", folder: bool = False) -> Path:
    """Check an output path before any work: its suffix (``suffix``, or a folder when
    ``folder``), its parent folder, and that it is none of ``inputs``."""
    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            raise FormatError(field, f"{path} is a file; this command writes a folder")
    else:
        if suffix is not None and path.suffix != suffix:
            raise FormatError(field, f"{path} must end in {suffix}")
        if path.is_dir():
            raise FormatError(field, f"{path} is a folder; give a file name")
        parent = path.parent
        if not parent.is_dir():
            raise FormatError(field, f"folder {parent} does not exist")
    for i in filter(None, inputs):
        i = Path(i)
        if path.resolve() == i.resolve() or (path.exists() and i.exists() and
                                             os.path.samefile(path, i)):
            raise FormatError(field, f"{path} is one of the command's inputs; choose "
                                     f"another name")
    return path


def write_file(path: Path, data: bytes | np.ndarray) -> None:
    """Write ``data`` (bytes, or an array saved as .npy) to exactly ``path``, whole: through a
    temporary file in the same folder, renamed into place."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, np.ndarray) and path.suffix == ".npy":
                np.save(f, data, allow_pickle=False)
            else:
                # an array's own buffer, not a copy: a 256 MiB image stays 256 MiB
                f.write(memoryview(np.ascontiguousarray(data)).cast("B")
                        if isinstance(data, np.ndarray) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` (its folder made, whole, as :func:`write_file`) unless the
    file holds it already; returns whether it wrote. An unchanged file keeps its date, so a
    simulator or a make rule that rebuilds what is newer does not run again."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_text() == text:
        return False
    write_file(path, text.encode())
    return True
