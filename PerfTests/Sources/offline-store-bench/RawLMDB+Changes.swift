import CLMDBBench

/// Local changes with their queue record, by hand: the entity put and its index entries (`put`),
/// then a queue record put under the next request id (a big-endian counter), in one transaction.
///
/// Raw LMDB has no group commit: concurrent writers are serialized on `changeLock` (which also
/// holds the counter), and each change is its own transaction and fsync.
extension RawLMDB {
    static let scratchSize = 64 + 78 + 1024
    /// method (PATCH = 2) · status (pending = 0) · created-at ticks i64 · repeatability id 16 · key 14 · body
    static let recordHeader = 2 + 8 + 16 + keySize

    func change(_ item: Item) throws {
        try withUnsafeTemporaryAllocation(byteCount: Self.scratchSize, alignment: 8) { buf in
            try changeLock.withLock { next in
                try write { txn in
                    try put(txn, item, replacing: true, buf.baseAddress!)
                    try putRecord(txn, item, id: next, buf.baseAddress!)
                }
                next += 1
            }
        }
    }

    func changeBatch(_ items: [Item]) throws {
        try withUnsafeTemporaryAllocation(byteCount: Self.scratchSize, alignment: 8) { buf in
            try changeLock.withLock { next in
                try write { txn in
                    for (n, item) in items.enumerated() {
                        try put(txn, item, replacing: true, buf.baseAddress!)
                        try putRecord(txn, item, id: next + UInt64(n), buf.baseAddress!)
                    }
                }
                next += UInt64(items.count)
            }
        }
    }

    /// The queue record of `item`'s change under request id `id` (`MDB_APPEND`: ids only grow).
    private func putRecord(_ txn: OpaquePointer, _ item: Item, id: UInt64, _ scratch: UnsafeMutableRawPointer) throws {
        let body = QueueRecord.body(item)
        var record = [UInt8](repeating: 0, count: Self.recordHeader + body.count)
        let (high, low) = QueueRecord.repeatabilityID()
        record.withUnsafeMutableBytes { r in
            let p = r.baseAddress!
            p.storeBytes(of: 2, as: UInt8.self)
            p.storeBytes(of: 0, toByteOffset: 1, as: UInt8.self)
            p.storeBytes(of: QueueRecord.now().littleEndian, toByteOffset: 2, as: Int64.self)
            p.storeBytes(of: high.bigEndian, toByteOffset: 10, as: UInt64.self)
            p.storeBytes(of: low.bigEndian, toByteOffset: 18, as: UInt64.self)
            Self.encodeKey(item.salesOrderID, item.itemPosition, p + 26)
            body.withUnsafeBytes { (p + Self.recordHeader).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        scratch.storeBytes(of: id.bigEndian, as: UInt64.self)
        var k = MDB_val(mv_size: 8, mv_data: scratch)
        try record.withUnsafeMutableBytes { r in
            var v = MDB_val(mv_size: r.count, mv_data: r.baseAddress)
            try check(mdb_put(txn, queue, &k, &v, UInt32(MDB_APPEND)))
        }
    }

    func queueCount() throws -> Int {
        try read { txn in
            var st = MDB_stat()
            try check(mdb_stat(txn, queue, &st))
            return st.ms_entries
        }
    }

    func queueBody(id: Int64) throws -> String? {
        var key = UInt64(id).bigEndian
        return try withUnsafeMutableBytes(of: &key) { kb in
            try read { txn in
                var k = MDB_val(mv_size: 8, mv_data: kb.baseAddress), v = MDB_val()
                let rc = mdb_get(txn, queue, &k, &v)
                if rc == MDB_NOTFOUND { return nil }
                try check(rc)
                let bytes = UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
                return String(decoding: bytes[Self.recordHeader...], as: UTF8.self)
            }
        }
    }
}
