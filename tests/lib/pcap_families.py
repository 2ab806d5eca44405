#!/usr/bin/env python3
"""Count the IP families of the UDP frames in a pcap or pcapng (Ethernet or
raw IP link type) and print ipv4=N ipv6=M loop6=K, K being IPv6 frames
from ::1 to ::1.  Exit 1 if the file is not a capture we can read."""
import struct
import sys

LOOP6 = bytes(15) + b"\x01"


def pcapng_frames(data):
    """(linktype, frames) of a pcapng file (SOFTRNIC_PCAP writes one)."""
    end = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    off, linktype, frames = 0, 1, []
    while off + 12 <= len(data):
        btype, blen = struct.unpack(end + "II", data[off:off + 8])
        if blen < 12 or off + blen > len(data):
            break
        if btype == 1:
            linktype = struct.unpack(end + "H", data[off + 8:off + 10])[0]
        elif btype == 6:
            cap = struct.unpack(end + "I", data[off + 20:off + 24])[0]
            frames.append(data[off + 28:off + 28 + cap])
        off += blen
    return linktype, frames


def count(linktype, frames):
    v4, v6, loop = 0, 0, 0
    for frame in frames:
        ip = frame[14:] if linktype == 1 else frame
        if not ip:
            continue
        if ip[0] >> 4 == 4:
            v4 += 1
        elif ip[0] >> 4 == 6 and len(ip) >= 40:
            v6 += 1
            if ip[8:24] == LOOP6 and ip[24:40] == LOOP6:
                loop += 1
    print("ipv4=%d ipv6=%d loop6=%d" % (v4, v6, loop))
    return 0


def main(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return 1
    magic = data[:4]
    if magic == b"\x0a\x0d\x0d\x0a":
        return count(*pcapng_frames(data))
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        end = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        end = ">"
    else:
        return 1
    linktype = struct.unpack(end + "I", data[20:24])[0]
    off, frames = 24, []
    while off + 16 <= len(data):
        incl = struct.unpack(end + "I", data[off + 8:off + 12])[0]
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return count(linktype, frames)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
