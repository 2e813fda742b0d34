"""app.safe_io: special files, loops and oversized files are refused before reading."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from app.limits import LIMITS, markdown_table
from app.safe_io import UnsafeInput, list_files, load_json, read_bytes, read_text

ROOT = Path(__file__).resolve().parents[3]


def _refused(path: Path, needle: str, max_bytes: int = 1000) -> UnsafeInput:
    with pytest.raises(UnsafeInput) as info:
        read_bytes(path, max_bytes=max_bytes, what="dataset file")
    assert str(path) in str(info.value) and needle in str(info.value), str(info.value)
    assert " — " in str(info.value)  # a fix follows the problem
    return info.value


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "a_v1.0.jsonl"
    os.mkfifo(fifo)
    _refused(fifo, "FIFO")


def test_symlink_loop_and_broken_link(tmp_path: Path) -> None:
    loop = tmp_path / "a_v1.0.jsonl"
    loop.symlink_to(loop.name)
    _refused(loop, "symlink loop")
    broken = tmp_path / "b.jsonl"
    broken.symlink_to("nowhere")
    _refused(broken, "broken symlink")


def test_devices_directories_and_sockets(tmp_path: Path) -> None:
    zero = tmp_path / "z.jsonl"
    zero.symlink_to("/dev/zero")
    _refused(zero, "a device")
    _refused(tmp_path, "a directory")
    sock_path = tmp_path / "s.jsonl"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(sock_path))
        _refused(sock_path, "a socket")
    finally:
        sock.close()


def test_oversized_file_is_refused_from_its_size(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as fh:
        fh.truncate(10**9)  # sparse: reading it would take a gigabyte
    exc = _refused(big, "over the 1,000-byte limit")
    assert "1,000,000,000 bytes" in exc.problem


def test_missing_file(tmp_path: Path) -> None:
    _refused(tmp_path / "nope.jsonl", "not found")


def test_decode_error_names_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "x.json"
    f.write_bytes(b'{"a": 1,\n  "b": "\xff"}\n')
    with pytest.raises(UnsafeInput) as info:
        read_text(f, max_bytes=100)
    assert info.value.line == 2
    assert "byte 0xff at column 9" in info.value.problem


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b'{"a": NaN}', "NaN"),
        (b'{"a": -Infinity}', "Infinity"),
        (b'{"a": 1e999}', "infinity"),
        (b"[" * 100_000, "nested too deeply"),
        (b'{\n"a": 1,}', "r.json:2: not valid JSON"),
    ],
)
def test_load_json_refuses_what_is_not_json(tmp_path: Path, body: bytes, needle: str) -> None:
    f = tmp_path / "r.json"
    f.write_bytes(body)
    with pytest.raises(UnsafeInput) as info:
        load_json(f, max_bytes=10**6)
    assert needle in str(info.value)


def test_empty_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(UnsafeInput, match=r"holds no \*\.jsonl file"):
        list_files(tmp_path, "*.jsonl", what="dataset files")
    (tmp_path / "a_v1.0.jsonl").write_text("{}\n")
    assert list_files(tmp_path, "*.jsonl", what="x") == [tmp_path / "a_v1.0.jsonl"]


def test_the_documented_limits_table_is_the_code() -> None:
    doc = (ROOT / "docs" / "limits.md").read_text(encoding="utf-8")
    assert markdown_table() in doc
    assert LIMITS["question_chars"].value == 8000
