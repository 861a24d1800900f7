#!/usr/bin/env python3
"""Lay captured /sys/class/infiniband trees out as the kernel does.

The captures (see README.md) are flat: one directory per RDMA device with
its attribute files. The kernel's class entries are symlinks into the PCI
device tree, and gpuhc (like rdmamap) relies on that: a device without a
PCI function is virtual and not judged. This script copies every captured
file byte for byte to
  sys/devices/pci0000:BB/0000:BB:00.0/infiniband/<dev>/...
and writes the links the kernel writes:
  sys/class/infiniband/<dev> -> ../../devices/pci0000:BB/0000:BB:00.0/infiniband/<dev>
  <that dir>/device          -> ../../../0000:BB:00.0
  sys/bus/pci/devices/0000:BB:00.0 -> ../../../devices/pci0000:BB/0000:BB:00.0
The PCI addresses are made up (the captures do not have them), one bus
per device in name order, from the bus given. Nothing else is added,
except proc/sys/kernel/random/boot_id (made up), which ib.counters keys
its baseline on.

usage: convert.py gitdir SRC OUT FIRST_BUS   (a flat tree in a git repo)
       convert.py ttar FILE PREFIX OUT FIRST_BUS   (a ttar archive)
"""
import os, subprocess, sys


def files_from_git(gitdir, src):
    out = {}
    names = subprocess.run(["git", "-C", gitdir, "ls-tree", "-r", "--name-only", "HEAD", src],
                           check=True, capture_output=True, text=True).stdout.split()
    for n in names:
        out[n[len(src) + 1:]] = subprocess.run(["git", "-C", gitdir, "show", "HEAD:" + n],
                                               check=True, capture_output=True).stdout
    return out


def files_from_ttar(path, prefix):
    out = {}
    lines = open(path, "rb").read().split(b"\n")
    i = 0
    while i < len(lines):
        l = lines[i]
        if l.startswith(b"Path: ") and l[6:].decode().startswith(prefix + "/"):
            p = l[6:].decode()[len(prefix) + 1:]
            n = int(lines[i + 1].split(b": ")[1])
            body = lines[i + 2:i + 2 + n]
            data = b"\n".join(body) + b"\n"
            if data.endswith(b"EOF\n"):  # ttar: no trailing newline
                data = data[:-4]
            out[p] = data
            i += 2 + n
            continue
        i += 1
    return out


def write(files, out, bus):
    devs = sorted({p.split("/")[0] for p in files})
    for k, dev in enumerate(devs):
        b = bus + 2 * k
        addr = "0000:%02x:00.0" % b
        pci = "sys/devices/pci0000:%02x/%s" % (b, addr)
        ib = pci + "/infiniband/" + dev
        for p, data in files.items():
            if p.split("/")[0] != dev:
                continue
            full = os.path.join(out, ib, *p.split("/")[1:])
            os.makedirs(os.path.dirname(full), exist_ok=True)
            open(full, "wb").write(data)
        links = {
            "sys/class/infiniband/" + dev: "../../devices/pci0000:%02x/%s/infiniband/%s" % (b, addr, dev),
            ib + "/device": "../../../" + addr,
            "sys/bus/pci/devices/" + addr: "../../../devices/pci0000:%02x/%s" % (b, addr),
        }
        for l, t in links.items():
            full = os.path.join(out, l)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            os.symlink(t, full)
    bid = os.path.join(out, "proc/sys/kernel/random/boot_id")
    os.makedirs(os.path.dirname(bid), exist_ok=True)
    open(bid, "w").write("5d1c4e9a-0b7f-4c2e-9a61-3f0e8d2b7c15\n")


if __name__ == "__main__":
    if sys.argv[1] == "gitdir":
        write(files_from_git(sys.argv[2], sys.argv[3]), sys.argv[4], int(sys.argv[5], 16))
    else:
        write(files_from_ttar(sys.argv[2], sys.argv[3]), sys.argv[4], int(sys.argv[5], 16))
