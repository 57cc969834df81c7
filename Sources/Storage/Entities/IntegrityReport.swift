import LMDB
/// What `check` found: counts, and every inconsistency (empty when the store is consistent).
public struct IntegrityReport: Sendable, CustomStringConvertible {
    public var entities = 0
    public var indexEntries = 0
    /// Stream records (media resources and stream properties), and the bytes of those stored.
    public var streams = 0
    public var streamBytes = 0
    /// Files of `streams/` no record refers to: left by a write that did not commit, or by a
    /// record replaced or deleted since the last sweep. Not a problem: the next sweep removes them.
    public var orphanStreamFiles = 0
    /// Pages of `data.mdb` in use that the structural audit read and checked.
    public var pagesAudited = 0
    /// Pages the free list holds.
    public var freePages = 0
    /// True when the structural audit found `data.mdb` damaged; then the logical check (which
    /// reads through LMDB's memory map) was not run, and the counts are what the audit reached.
    public var isDamaged = false
    /// The problems, at most the `maxProblems` asked for.
    public var problems: [String] = []
    /// How many problems there were in all.
    public var problemCount = 0
    public var isConsistent: Bool { problemCount == 0 }

    public init() {}

    /// The report of a store whose file failed the structural audit.
    init(damaged audit: PageAuditReport) {
        isDamaged = true
        pagesAudited = audit.pagesAudited
        freePages = audit.freePages
        problems = audit.problems
        problemCount = audit.problemCount
        for db in audit.databases {
            if db.name.hasPrefix("e/") { entities += db.entries }
            if db.name.hasPrefix("i/") { indexEntries += db.entries }
        }
    }

    /// Adds problems found by another checker (the request queue's, membership's), counted.
    package mutating func add(_ more: [String], max: Int = 100) {
        for p in more { problem(p, max: max) }
    }

    mutating func problem(_ text: String, max: Int) {
        problemCount += 1
        if problems.count < max { problems.append(text) }
    }

    public var description: String {
        let pages = "\(pagesAudited) pages audited (\(freePages) free)"
        let streamText = streams == 0 ? "" : ", \(streams) streams (\(streamBytes) bytes stored)"
        if isConsistent { return "ok: \(entities) entities, \(indexEntries) index entries\(streamText); \(pages)" }
        var lines = problems
        if problemCount > problems.count { lines.append("… and \(problemCount - problems.count) more") }
        if isDamaged {
            lines.append(
                "damaged: data.mdb fails the structural audit (\(problemCount) problem\(problemCount == 1 ? "" : "s")), so the logical check was not run; the audit reached \(entities) entities and \(indexEntries) index entries in \(pages)"
            )
        }
        return lines.joined(separator: "\n")
    }
}

/// How far a `check` has got, for a progress line: its logical half, after the structural audit
/// of the file, reads every entity and index entry once.
public struct CheckProgress: Sendable, Equatable {
    /// Entities and index entries checked so far.
    public var checked: Int
    /// Entities and index entries the store holds (what `checked` reaches at the end).
    public var total: Int
    /// The entity set being checked; empty once they are all checked.
    public var set: String

    public init(checked: Int, total: Int, set: String) {
        (self.checked, self.total, self.set) = (checked, total, set)
    }

    /// Counts what is checked and calls `report` at each set, every `step` items and at the end.
    struct Counter {
        var value = CheckProgress(checked: 0, total: 0, set: "")
        let report: ((CheckProgress) -> Void)?
        let step = 4096
        private var sinceReport = 0

        init(report: ((CheckProgress) -> Void)?) { self.report = report }

        mutating func begin(_ set: String) {
            value.set = set
            sinceReport = 0
            report?(value)
        }

        mutating func tick() {
            value.checked += 1
            sinceReport += 1
            if sinceReport >= step {
                sinceReport = 0
                report?(value)
            }
        }

        mutating func end() {
            value.set = ""
            report?(value)
        }
    }
}
