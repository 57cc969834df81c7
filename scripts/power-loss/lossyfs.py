#!/usr/bin/env python3
"""lossyfs: a FUSE passthrough over a backing directory that models a power cut.

    python lossyfs.py BACKING MOUNTPOINT [--seed N] [--stats FILE]

The backing directory always holds exactly what would survive a power cut now ("the disk"); the
data written since a file's last sync lives only in this process ("the page cache"):

- write(2) on a file goes to an in-memory overlay of 4 KiB pages over the backing file (reads see
  it; so do mmap reads, through the kernel's page cache, which FUSE fills from read and write);
- fsync(2) and fdatasync(2) on a file (any descriptor of it) write its overlay to the backing file
  and empty it; a write through a descriptor opened O_SYNC or O_DSYNC is written to the backing file
  at once (that write's bytes only; LMDB writes its meta page that way);
- names are not modelled: create, mkdir, rename, unlink and truncate act on the backing directory at
  once (durable at once). LMDB creates its two files once and never truncates data.mdb without
  MDB_WRITEMAP, which the store does not use.

A cut is a write of "cut MODE" to the virtual file /.lossyfs-cut (MODE: drop, sectors):

- drop: every unsynced write is lost (the page cache is gone);
- sectors: each unsynced 512-byte sector is independently kept or lost (seeded): the kernel may
  have written back any part of the dirty page cache, in any order, before the cut.

After the cut every operation fails with EIO (the machine is off): the caller then SIGKILLs the
writers and unmounts (fusermount3 -u). The cut's figures go to --stats as one JSON line, written
before the write of "cut" returns.
"""

import argparse
import errno
import json
import os
import random
import stat
import sys
import threading

import mfusepy as fuse

PAGE = 4096
SECTOR = 512
CONTROL = "/.lossyfs-cut"
SYNC_FLAGS = os.O_SYNC | os.O_DSYNC


class Overlay:
    """A file's unsynced state: pages written since its last sync, and its size."""

    def __init__(self, size):
        self.size = size
        self.pages = {}  # page index -> bytearray(PAGE)


class LossyFS(fuse.Operations):
    use_ns = True

    def __init__(self, backing, seed, stats_path):
        self.root = os.path.realpath(backing)
        self.mutex = threading.Lock()
        self.overlays = {}  # path relative to the mount -> Overlay
        self.handles = {}  # fh -> (path, sync?)
        self.dead = False
        self.rng = random.Random(seed)
        self.stats_path = stats_path
        self.counts = {"writes": 0, "syncs": 0, "sync_writes": 0, "bytes_synced": 0}

    # -- helpers ---------------------------------------------------------------------------------

    def _full(self, path):
        return self.root + path

    def _alive(self):
        if self.dead:
            raise fuse.FuseOSError(errno.EIO)

    def _backing_size(self, path):
        try:
            return os.stat(self._full(path)).st_size
        except FileNotFoundError:
            return 0

    def _backing_page(self, fd, index):
        data = os.pread(fd, PAGE, index * PAGE)
        return bytearray(data) + bytearray(PAGE - len(data))

    def _flush_overlay(self, path, ov, keep=None):
        """Writes the overlay's pages (or, with keep, the sectors keep() chooses) to the backing
        file. Returns (sectors written, sectors dropped)."""
        written = dropped = 0
        fd = os.open(self._full(path), os.O_WRONLY)
        try:
            for index in sorted(ov.pages):
                page = ov.pages[index]
                start = index * PAGE
                end = min(start + PAGE, ov.size)
                if end <= start:
                    continue
                if keep is None:
                    os.pwrite(fd, bytes(page[: end - start]), start)
                    written += (end - start + SECTOR - 1) // SECTOR
                    continue
                for s in range(start, end, SECTOR):
                    e = min(s + SECTOR, end)
                    if keep():
                        os.pwrite(fd, bytes(page[s - start : e - start]), s)
                        written += 1
                    else:
                        dropped += 1
            if keep is None and os.fstat(fd).st_size < ov.size:
                os.ftruncate(fd, ov.size)
        finally:
            os.close(fd)
        return written, dropped

    # -- the control file ------------------------------------------------------------------------

    def _cut(self, mode):
        files = pages = kept = lost = 0
        pending = {}
        for path, ov in self.overlays.items():
            if not ov.pages:
                continue
            files += 1
            pages += len(ov.pages)
            pending[path] = len(ov.pages)
            if mode == "sectors":
                w, d = self._flush_overlay(path, ov, keep=lambda: self.rng.random() < 0.5)
                kept += w
                lost += d
            else:
                lost += sum(
                    (min(PAGE, ov.size - i * PAGE) + SECTOR - 1) // SECTOR for i in ov.pages if ov.size > i * PAGE
                )
        self.overlays = {}
        self.dead = True
        figures = dict(
            self.counts, mode=mode, files=files, pages=pages, pending=pending, sectors_kept=kept, sectors_lost=lost
        )
        if self.stats_path:
            with open(self.stats_path, "a") as f:
                f.write(json.dumps(figures) + "\n")
                f.flush()
                os.fsync(f.fileno())

    # -- metadata --------------------------------------------------------------------------------

    def getattr(self, path, fh=None):
        if path == CONTROL:
            return {"st_mode": stat.S_IFREG | 0o200, "st_nlink": 1, "st_size": 0}
        with self.mutex:
            self._alive()
            try:
                st = os.lstat(self._full(path))
            except OSError as e:
                raise fuse.FuseOSError(e.errno)
            d = {
                key: getattr(st, key)
                for key in (
                    "st_mode",
                    "st_nlink",
                    "st_uid",
                    "st_gid",
                    "st_size",
                    "st_atime_ns",
                    "st_mtime_ns",
                    "st_ctime_ns",
                )
            }
            for key in ("st_atime", "st_mtime", "st_ctime"):
                d[key] = d.pop(key + "_ns")
            ov = self.overlays.get(path)
            if ov is not None:
                d["st_size"] = ov.size
            return d

    def readdir(self, path, fh):
        with self.mutex:
            self._alive()
            return [".", ".."] + os.listdir(self._full(path))

    def statfs(self, path):
        with self.mutex:
            self._alive()
            sv = os.statvfs(self._full(path))
            return {
                key: getattr(sv, key)
                for key in (
                    "f_bavail",
                    "f_bfree",
                    "f_blocks",
                    "f_bsize",
                    "f_favail",
                    "f_ffree",
                    "f_files",
                    "f_flag",
                    "f_frsize",
                    "f_namemax",
                )
            }

    def access(self, path, amode):
        if path == CONTROL:
            return 0
        with self.mutex:
            self._alive()
            if not os.access(self._full(path), amode):
                raise fuse.FuseOSError(errno.EACCES)
            return 0

    def chmod(self, path, mode):
        with self.mutex:
            self._alive()
            os.chmod(self._full(path), mode)
            return 0

    def chown(self, path, uid, gid):
        with self.mutex:
            self._alive()
            os.chown(self._full(path), uid, gid)
            return 0

    def utimens(self, path, times=None):
        with self.mutex:
            self._alive()
            os.utime(self._full(path), ns=times)
            return 0

    def mkdir(self, path, mode):
        with self.mutex:
            self._alive()
            os.mkdir(self._full(path), mode)
            return 0

    def rmdir(self, path):
        with self.mutex:
            self._alive()
            os.rmdir(self._full(path))
            return 0

    def unlink(self, path):
        with self.mutex:
            self._alive()
            os.unlink(self._full(path))
            self.overlays.pop(path, None)
            return 0

    def rename(self, old, new):
        with self.mutex:
            self._alive()
            os.rename(self._full(old), self._full(new))
            ov = self.overlays.pop(old, None)
            self.overlays.pop(new, None)
            if ov is not None:
                self.overlays[new] = ov
            return 0

    def truncate(self, path, length, fh=None):
        with self.mutex:
            self._alive()
            self._truncate(path, length)
            return 0

    def _truncate(self, path, length):
        os.truncate(self._full(path), length)
        ov = self.overlays.get(path)
        if ov is not None:
            ov.size = length
            for index in [i for i in ov.pages if i * PAGE >= length]:
                del ov.pages[index]
            tail = length % PAGE
            if tail and length // PAGE in ov.pages:
                page = ov.pages[length // PAGE]
                page[tail:] = bytearray(PAGE - tail)

    # -- data ------------------------------------------------------------------------------------

    def _handle(self, path, flags):
        fh = 1
        while fh in self.handles:
            fh += 1
        self.handles[fh] = (path, bool(flags & SYNC_FLAGS))
        return fh

    def create(self, path, mode, flags=0):
        with self.mutex:
            self._alive()
            fd = os.open(self._full(path), os.O_WRONLY | os.O_CREAT | (flags & os.O_EXCL), mode)
            os.close(fd)
            return self._handle(path, flags)

    def open(self, path, flags):
        if path == CONTROL:
            return 0
        with self.mutex:
            self._alive()
            if not os.path.isfile(self._full(path)):
                raise fuse.FuseOSError(errno.ENOENT)
            if flags & os.O_TRUNC:
                self._truncate(path, 0)
            return self._handle(path, flags)

    def release(self, path, fh):
        with self.mutex:
            self.handles.pop(fh, None)
            return 0

    def flush(self, path, fh):
        return 0

    def read(self, path, size, offset, fh):
        with self.mutex:
            self._alive()
            path = self.handles.get(fh, (path,))[0]
            ov = self.overlays.get(path)
            fd = os.open(self._full(path), os.O_RDONLY)
            try:
                if ov is None:
                    return os.pread(fd, size, offset)
                end = min(offset + size, ov.size)
                if end <= offset:
                    return b""
                out = bytearray()
                for index in range(offset // PAGE, (end - 1) // PAGE + 1):
                    page = ov.pages.get(index)
                    if page is None:
                        page = self._backing_page(fd, index)
                    out += page
                base = (offset // PAGE) * PAGE
                return bytes(out[offset - base : end - base])
            finally:
                os.close(fd)

    def write(self, path, data, offset, fh):
        with self.mutex:
            if path == CONTROL:
                words = data.decode().split()
                if words and words[0] == "cut" and not self.dead:
                    self._cut(words[1] if len(words) > 1 else "drop")
                return len(data)
            self._alive()
            path, sync = self.handles.get(fh, (path, False))
            self.counts["writes"] += 1
            if sync:
                # O_SYNC/O_DSYNC: this write is on the disk when it returns.
                fd = os.open(self._full(path), os.O_WRONLY)
                try:
                    os.pwrite(fd, data, offset)
                finally:
                    os.close(fd)
                self.counts["sync_writes"] += 1
                self.counts["bytes_synced"] += len(data)
            ov = self.overlays.get(path)
            if ov is None:
                if sync:
                    return len(data)
                ov = self.overlays[path] = Overlay(self._backing_size(path))
            fd = os.open(self._full(path), os.O_RDONLY)
            try:
                end = offset + len(data)
                for index in range(offset // PAGE, (end - 1) // PAGE + 1):
                    page = ov.pages.get(index)
                    if page is None:
                        if sync:
                            continue  # the backing page has it now
                        page = ov.pages[index] = self._backing_page(fd, index)
                    start = index * PAGE
                    lo, hi = max(offset, start), min(end, start + PAGE)
                    page[lo - start : hi - start] = data[lo - offset : hi - offset]
                ov.size = max(ov.size, end)
            finally:
                os.close(fd)
            return len(data)

    def fsync(self, path, datasync, fh):
        with self.mutex:
            self._alive()
            path, sync = self.handles.get(fh, (path, False))
            self.counts["syncs"] += 1
            if sync:
                # The kernel's own fsync after each write through an O_SYNC/O_DSYNC descriptor
                # (FUSE passes no range): that write is on the disk already; the file's other
                # unsynced writes are not made durable by it.
                return 0
            ov = self.overlays.pop(path, None)
            if ov is not None:
                written, _ = self._flush_overlay(path, ov)
                self.counts["bytes_synced"] += written * SECTOR
            return 0


def main():
    parser = argparse.ArgumentParser(description="A FUSE layer that loses unsynced writes at a cut.")
    parser.add_argument("backing")
    parser.add_argument("mountpoint")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stats", default=None)
    args = parser.parse_args()
    ops = LossyFS(args.backing, args.seed, args.stats)
    # No kernel caching of attributes or names: sizes come from the overlay. The page cache
    # stays (LMDB reads data.mdb through a shared read-only map, which direct_io would forbid).
    fuse.FUSE(
        ops,
        args.mountpoint,
        foreground=True,
        nothreads=False,
        attr_timeout=0,
        entry_timeout=0,
        negative_timeout=0,
    )


if __name__ == "__main__":
    sys.exit(main())
