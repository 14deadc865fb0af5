"""Editing native cache files below the API: sections, checksums, the header's own checksum.

Used to write the hostile files (generate.py) and by the tests that damage
files on purpose (test_trust.py, test_fuzz.py): a damage is only interesting
if it is the only one, so these helpers recompute whatever checksum the test
means to forge.
"""

import struct

import xxhash

from ngramdraft.files.ngd.header import HEADER_SIZE, SLOTS

_TABLE = 96  # the section table's offset in the header (docs/format.md)
_ROW = 32  # offset, size, xxh3_64, reserved


def rehash(raw):
    """Recompute the header checksum so that only the intended damage remains."""
    raw[HEADER_SIZE - 8 : HEADER_SIZE] = struct.pack(
        "<Q", xxhash.xxh3_64_intdigest(bytes(raw[: HEADER_SIZE - 8]))
    )
    return raw


def section(raw, name):
    """(offset, size) of a section, as the header's table says."""
    return struct.unpack_from("<QQ", raw, _TABLE + _ROW * SLOTS.index(name))


def set_section(raw, name, offset=None, size=None):
    old_offset, old_size = section(raw, name)
    struct.pack_into(
        "<QQ",
        raw,
        _TABLE + _ROW * SLOTS.index(name),
        old_offset if offset is None else offset,
        old_size if size is None else size,
    )
    return raw


def forge(raw):
    """Recompute every section checksum the table can locate, then the header's."""
    for i, name in enumerate(SLOTS):
        offset, size = section(raw, name)
        if offset and offset + size <= len(raw):  # a slot the kind does not use is zero
            digest = xxhash.xxh3_64_intdigest(bytes(raw[offset : offset + size]))
            struct.pack_into("<Q", raw, _TABLE + _ROW * i + 16, digest)
    return rehash(raw)
