#!/usr/bin/env python3
"""Count the IP families of the UDP frames in a pcap (Ethernet or raw IP
link type) and print ipv4=N ipv6=M loop6=K, K being IPv6 frames from ::1
to ::1.  Exit 1 if the file is not a pcap we can read."""
import struct
import sys

LOOP6 = bytes(15) + b"\x01"


def main(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return 1
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        end = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        end = ">"
    else:
        return 1
    linktype = struct.unpack(end + "I", data[20:24])[0]
    off, v4, v6, loop = 24, 0, 0, 0
    while off + 16 <= len(data):
        incl = struct.unpack(end + "I", data[off + 8:off + 12])[0]
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
