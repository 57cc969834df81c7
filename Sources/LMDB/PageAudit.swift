#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A structural audit of `data.mdb` that reads the file with `pread` only, never through LMDB's
/// memory map, so damage it finds is reported rather than crashing the process.
///
/// From the meta page LMDB would use it walks the free list, the main database and every named
/// database, and checks before following anything: page numbers in range and inside the file,
/// each page's header (its own number, one valid kind, `mp_lower`/`mp_upper`), every node inside
/// its page, keys in order within a page and between the separators above it (LMDB's default
/// `memcmp` order; the free list's integer order), every leaf at the tree's depth, overflow runs
/// with a header that covers their data, no page reached twice, and the counts in each
/// database's record. Then every page must be in exactly one tree or in the free list.
///
/// ```swift
/// let report = try PageAudit.run(path: dir + "/data.mdb")!
/// if !report.isSound { print(report.problems.joined(separator: "\n")) }
/// ```
/// Memory: one page buffer and one bit per page of the file; the time is one `pread` per page in
/// use (0.2 s for the 103,000 pages of a 1,000,000-row store).
package enum PageAudit {
    /// Audits the file at `path`.
    ///
    /// - Parameters:
    ///   - snapshot: audit the snapshot of this transaction id (an open read transaction's, whose
    ///     pages LMDB keeps while it lives) rather than the newest.
    ///   - maxProblems: how many problems to describe; the rest are counted.
    /// - Returns: the report, or nil when `snapshot` is given and neither meta page holds it any
    ///   more (two commits since it began): begin a new read transaction and ask again.
    /// - Throws: `DataFileError.unreadable` if the file cannot be opened or read.
    package static func run(
        path: String, snapshot: UInt64? = nil, maxProblems: Int = 100
    ) throws(DataFileError) -> PageAuditReport? {
        guard let file = try _DataFile.open(path) else {
            throw .unreadable(path: path, operation: "open", errno: ENOENT)
        }
        var report = PageAuditReport(fileSize: file.size)
        guard file.size > 0 else {
            report.problems = ["data.mdb is empty (0 bytes): the store holds nothing"]
            report.problemCount = 1
            return report
        }
        let metas: _MetaPages
        do { metas = try _MetaPages.read(file) } catch .tooShortForMetaPages {
            report.problems = ["data.mdb is truncated: \(file.size) bytes are too few for its two meta pages"]
            report.problemCount = 1
            return report
        }
        let picked: (index: Int, meta: _Meta)
        if let snapshot {
            guard let m = metas.holding(snapshot) else { return nil }
            picked = m
        } else {
            guard let m = metas.chosen else {
                report.problems = metas.problems + ["no valid meta page: nothing can be read"]
                report.problemCount = report.problems.count
                return report
            }
            picked = m
        }
        if let flaw = picked.meta.flaw, flaw.misleadsLMDB {
            report.problems = metas.problems + ["meta page \(picked.index), the one LMDB would use, cannot be walked"]
            report.problemCount = report.problems.count
            return report
        }
        let auditor = _PageAuditor(file: file, meta: picked.meta, maxProblems: maxProblems)
        for p in metas.problems { auditor.problem(p) }
        auditor.auditEverything()
        report.txnid = picked.meta.txnid
        report.pageSize = picked.meta.pageSize
        report.pages = picked.meta.pages
        report.pagesAudited = auditor.used.count
        report.freePages = auditor.free.count
        report.databases = auditor.databases
        report.problems = auditor.problems
        report.problemCount = auditor.problemCount
        return report
    }
}

/// What `PageAudit.run` found.
package struct PageAuditReport: Sendable {
    /// The transaction whose snapshot was audited.
    package var txnid: UInt64 = 0
    package var pageSize = 0
    /// How many pages the meta page says the file has (`mm_last_pg + 1`).
    package var pages: UInt64 = 0
    package var fileSize: Int
    /// Pages found in use and checked: the meta pages and every tree's branch, leaf and overflow pages.
    package var pagesAudited = 0
    /// Pages the free list holds.
    package var freePages = 0
    /// Each named database and the entries found in it.
    package var databases: [(name: String, entries: Int)] = []
    /// The first problems found, each naming the database and page.
    package var problems: [String] = []
    /// How many problems there were in all.
    package var problemCount = 0

    package init(fileSize: Int) { self.fileSize = fileSize }

    package var isSound: Bool { problemCount == 0 }
}
