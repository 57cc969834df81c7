import Synchronization
import Foundation
import Glibc
import LMDB

extension EntityStore {
    /// Removes the files of `streams/` that no record refers to and no process is writing: those
    /// of records replaced or deleted since, and those a crash left before their transaction
    /// committed. Each is locked first (a writer holds its file's lock until its record
    /// commits), then the records are read in a transaction begun after the locks were taken —
    /// so a file whose record committed is seen as referenced. Returns how many it removed. A
    /// file whose lock another process still holds for an instant (a child being spawned shares
    /// the writer's descriptors until it execs) is left to the next sweep.
    @discardableResult
    package func sweepStreams() throws -> Int {
        guard let streams, !environment.isReadOnly else { return 0 }
        streams.mayHaveOrphans.withLock { $0 = false }
        var locked: [(name: String, fd: Int32)] = []
        defer { for l in locked { close(l.fd) } }
        for name in streams.fileNames() {
            let fd = Glibc.open(streams.directory + "/" + name, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { locked.append((name, fd)) } else { close(fd) }
        }
        if locked.isEmpty { return 0 }
        let referenced: Set<String>
        do { referenced = try read { t in try referencedStreamFiles(t) } } catch {
            streams.mayHaveOrphans.withLock { $0 = true }  // the next one sweeps again
            throw error
        }
        var removed = 0
        for l in locked where !referenced.contains(l.name) {
            if unlink(streams.directory + "/" + l.name) == 0 { removed += 1 }
        }
        return removed
    }

    /// `sweepStreams` when a write since the last sweep removed or replaced a stream record.
    package func sweepStreamsIfNeeded() {
        guard let streams, streams.mayHaveOrphans.withLock({ $0 }) else { return }
        _ = try? sweepStreams()
    }

    /// The files the stream records of snapshot `t` name, and those the roles keep
    /// (`StoreRole.streamFiles`: the bytes of queued stream changes).
    func referencedStreamFiles(_ t: ReadView) throws -> Set<String> {
        guard let streams else { return [] }
        var files: Set<String> = []
        for role in roles { files.formUnion(try role.streamFiles(self, t)) }
        try t.withCursor(streams.database) { c in
            var e = try c.first()
            while let (_, v) = e {
                if let file = (try? StreamRecord.decode(v))?.file { files.insert(file) }
                e = try c.next()
            }
        }
        return files
    }

    /// `check`'s part for streams, in its read transaction: every record decodes, belongs to an
    /// entity that exists, names a stream its type declares (the media resource of a `HasStream`
    /// type, or an `Edm.Stream` property); a stored one's file exists with the recorded size and
    /// SHA-256 (read whole, in pieces); a not-downloaded one names no file. Files no record
    /// refers to are counted (`orphanStreamFiles`), not problems: the next sweep removes them.
    func checkStreams(_ t: ReadView, into report: inout IntegrityReport, problem: (String) -> Void) throws {
        guard let streams else { return }
        var entries: [([UInt8], [UInt8])] = []
        try t.withCursor(streams.database) { c in
            var e = try c.first()
            while let (k, v) = e {
                entries.append((Array(k), Array(v)))
                e = try c.next()
            }
        }
        var referenced: Set<String> = []
        for (key, value) in entries {
            guard let split = key.withUnsafeBytes({ splitEntityKey($0) }) else {
                problem("streams: a record under key \(key.prefix(64)) is not of an entity of a service set")
                continue
            }
            let set = split.set
            let nameBytes = Array(key[split.length...])
            guard let name = StreamStore.streamName(nameBytes) else {
                problem("streams: a record of \(set.name) has no stream name in its key")
                continue
            }
            let keyText = set.describeKeyBytes(split.keyBytes)
            let what = "\(set.name)(\(keyText))" + (name.isEmpty ? "/$value" : "/\(name)")
            guard let record = try? StreamRecord.decode(value) else {
                problem("streams: the record of \(what) does not decode")
                continue
            }
            report.streams += 1
            if try t.get(set.entities, split.keyBytes) == nil {
                problem("streams: \(what) has a stream but no entity")
            }
            if name.isEmpty ? !set.type.hasStream : !set.type.streamProperties.contains(name) {
                problem("streams: \(what) is not a stream the type \(set.type.qualifiedName) declares")
            }
            switch record.state {
            case .notDownloaded:
                if record.file != nil { problem("streams: \(what) is not downloaded but names a file") }
            case .stored:
                guard let file = record.file else {
                    problem("streams: \(what) is stored but names no file")
                    continue
                }
                referenced.insert(file)
                do {
                    let opened = try streams.open(record, what: what)
                    if opened.size != record.size {
                        problem(
                            "streams: \(what)'s file streams/\(file) has \(opened.size) bytes, not \(record.size ?? -1)"
                        )
                    } else if try opened.sha256() != record.sha256 {
                        problem("streams: \(what)'s file streams/\(file) does not have the recorded SHA-256")
                    }
                    report.streamBytes += opened.size
                } catch {
                    problem("streams: \(error)")
                }
            }
        }
        for role in roles { referenced.formUnion(try role.streamFiles(self, t)) }
        report.orphanStreamFiles = streams.fileNames().filter { !referenced.contains($0) }.count
    }
}
