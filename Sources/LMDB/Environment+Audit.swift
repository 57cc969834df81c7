extension Environment {
    /// Refuses a `data.mdb` that LMDB's memory map would read past its end, before
    /// `mdb_env_open` maps it: on such a file the first read of a missing page is a SIGBUS, since
    /// the map is as large as the map size, not the file. Reads both meta pages with `pread`,
    /// takes the one LMDB would use, and compares the pages it gives with the file's size. A
    /// file may end early only where the free list holds the missing pages (LMDB never writes a
    /// page it freed in the transaction that allocated it), so a short file costs a walk of the
    /// free list; an intact one costs two small reads. No file, or an empty one, is a new store.
    ///
    /// A writer in another process may commit while this looks: the file grows before a meta page
    /// names the new pages (so a size taken before the meta page is read can be short of it), and
    /// the free list of a replaced snapshot may be overwritten while it is walked. A verdict of
    /// truncation therefore stands only when the file's size and its chosen meta page are the same
    /// before and after it was reached; otherwise the look is taken again (up to 100 times).
    ///
    /// - Throws: `DataFileError`: `.truncated`, `.tooShortForMetaPages`, `.badMetaPage` (a meta
    ///   page LMDB would refuse too, with less to say, or misread), `.unreadable`.
    package static func _refuseDamagedDataFile(in directory: String) throws(DataFileError) {
        let path = directory + "/data.mdb"
        var attempt = 0
        while true {
            attempt += 1
            guard let file = try _DataFile.open(path), file.size > 0 else { return }
            let metas = try _MetaPages.read(file)
            if let reason = metas.refusal { throw .badMetaPage(path: file.path, reason: reason) }
            guard let meta = metas.chosen?.meta else { return }  // none only when refused above
            guard let truncated = _truncation(file, meta) else { return }
            // The same file, size and snapshot still: the verdict stands.
            guard attempt < 100, let again = try _DataFile.open(path), again.size > 0 else { throw truncated }
            if again.size == file.size, (try? _MetaPages.read(again))?.chosen?.meta.txnid == meta.txnid {
                throw truncated
            }
        }
    }

    /// Whether `file` ends before the pages `meta` says it has, other than free ones.
    private static func _truncation(_ file: _DataFile, _ meta: _Meta) -> DataFileError? {
        let wholePages = UInt64(file.size / meta.pageSize)
        guard wholePages < meta.pages else { return nil }
        // A free list that cannot be read whole cannot vouch for the missing pages.
        let truncated = DataFileError.truncated(
            path: file.path, pages: meta.pages, pageSize: meta.pageSize, fileSize: file.size)
        guard case .success(let free) = _PageAuditor(file: file, meta: meta, maxProblems: 1).freeListOnly() else {
            return truncated
        }
        for page in wholePages..<meta.pages where !free.contains(page) { return truncated }
        return nil
    }

    /// Runs `body` in a read transaction with the structural audit (`PageAudit`) of the snapshot
    /// that transaction reads, made while the transaction keeps the snapshot's pages from reuse;
    /// `audited` is taken instead when it is of that snapshot.
    ///
    /// - Throws: `CheckInterrupted` when writers replace the snapshot 100 times running before
    ///   its audit finds its meta page; what `PageAudit.run` and `body` throw.
    package func readAudited<R>(
        maxProblems: Int = 100, reusing audited: PageAuditReport? = nil,
        _ body: (ReadView, PageAuditReport) throws -> R
    ) throws -> R {
        let attempts = 100
        for _ in 0..<attempts {
            // nil when two commits came before the audit read the meta pages: the snapshot's
            // meta page is gone, though its other pages are still kept.
            let outcome: R? = try read { txn in
                let audit: PageAuditReport
                if let audited, audited.txnid == txn.view.id {
                    audit = audited
                } else if let fresh = try PageAudit.run(
                    path: path + "/data.mdb", snapshot: txn.view.id, maxProblems: maxProblems)
                {
                    audit = fresh
                } else {
                    return nil
                }
                return try body(txn.view, audit)
            }
            if let outcome { return outcome }
        }
        throw CheckInterrupted(attempts: attempts)
    }
}

/// `check` could not hold one snapshot still: writes kept replacing it faster than it could begin.
public struct CheckInterrupted: Error, Sendable, CustomStringConvertible {
    public let attempts: Int
    public var description: String {
        "check: the store changed under the check \(attempts) times in a row; try again when it is written less often"
    }
}
