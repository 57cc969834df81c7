import LMDB
import Query
import Queue
import Storage

/// What a refresh did, per defining request and in all.
public struct RefreshReport: Sendable, Hashable, CustomStringConvertible {
    /// How a request was read.
    public enum Mode: String, Sendable, Hashable {
        /// Its delta link: only what changed since the last refresh.
        case delta
        /// Every page of the request (the first refresh, a request without change tracking, one
        /// with `$expand` the service gives no delta link for).
        case full
        /// The service refused the delta link (410 Gone or another 4xx): a full read instead.
        case fullAfterExpiredDelta
        /// The service refused change tracking for this request (400 or 501 to `Prefer:
        /// odata.track-changes`, as SAP Gateway does for a type without a change timestamp): read
        /// in full, and remembered, so later refreshes read it in full without asking.
        case fullWithoutTracking
    }

    public struct Request: Sendable, Hashable {
        public var name: String
        public var mode: Mode
        /// Responses read (pages of the collection, or of the delta).
        public var pages = 0
        /// Entity objects received, expanded ones and `@removed` entries included.
        public var received = 0
        /// Bytes of response bodies read.
        public var bytes = 0
        /// Entities written because they were new or changed (rebased ones included).
        public var written = 0
        /// Entities deleted from the store: no defining request holds them any more.
        public var removed = 0
        /// Entities with pending local changes that got the new server image under them.
        public var rebased = 0
        /// Of those, the ones where the service had changed a property the pending change
        /// changes too, to another value: a conflict, in the ErrorArchive with its three
        /// versions (or settled by the set's `conflictPolicies`), as a 412 would be at flush.
        public var conflicts = 0
        /// Entities the service no longer returns for this request that stay because of pending
        /// local changes (retained), as the refresh leaves them.
        public var retained = 0
        /// Properties the service sent that the store's `$metadata` does not declare, skipped (a
        /// service may add properties; the store keeps what its schema has).
        public var skippedProperties = 0
        /// Values the service sent beyond a facet its `$metadata` declares (MaxLength, Precision,
        /// Scale): stored as sent, and counted here (local writes are held to the facets).
        public var facetViolations = 0
        /// Entities the service counted for a full read (when asked to count) but its pages
        /// did not bring (offset paging while the collection changed). When not 0, nothing was
        /// removed and no delta link kept: the next refresh reads the request in full again.
        public var missing = 0
        /// Streams downloaded (the request's `retrieveStreams`): new or changed since the last
        /// refresh; and their bytes.
        public var streamsDownloaded = 0
        public var streamBytes = 0
        /// Streams the service did not answer with a success: still not downloaded (the next
        /// refresh tries them again), the first few with the service's answer in `streamProblems`.
        public var streamsFailed = 0
        public var streamProblems: [String] = []

        public init(name: String, mode: Mode) {
            self.name = name
            self.mode = mode
        }
    }

    public var requests: [Request] = []
    /// Requests the queue compaction removed (merged into another, or changing nothing).
    public var compacted = 0

    public init() {}

    public var received: Int { requests.reduce(0) { $0 + $1.received } }
    public var written: Int { requests.reduce(0) { $0 + $1.written } }
    public var removed: Int { requests.reduce(0) { $0 + $1.removed } }
    public var rebased: Int { requests.reduce(0) { $0 + $1.rebased } }
    public var conflicts: Int { requests.reduce(0) { $0 + $1.conflicts } }
    public var skippedProperties: Int { requests.reduce(0) { $0 + $1.skippedProperties } }
    public var missing: Int { requests.reduce(0) { $0 + $1.missing } }
    public var facetViolations: Int { requests.reduce(0) { $0 + $1.facetViolations } }
    public var streamsDownloaded: Int { requests.reduce(0) { $0 + $1.streamsDownloaded } }
    public var streamBytes: Int { requests.reduce(0) { $0 + $1.streamBytes } }
    public var streamsFailed: Int { requests.reduce(0) { $0 + $1.streamsFailed } }

    /// One line: `refreshed 2 requests (Products: delta, Orders: full): 120 received, 118 written, 2 removed, 1 rebased, 0 compacted`.
    public var description: String {
        let modes = requests.map { "\($0.name): \($0.mode.rawValue)" }.joined(separator: ", ")
        return
            "refreshed \(requests.count) request\(requests.count == 1 ? "" : "s")\(modes.isEmpty ? "" : " (\(modes))"): "
            + "\(received) received, \(written) written, \(removed) removed, \(rebased) rebased, \(compacted) compacted"
            + (conflicts == 0 ? "" : ", \(conflicts) conflict\(conflicts == 1 ? "" : "s") with pending changes")
            + (skippedProperties == 0 ? "" : ", \(skippedProperties) unknown properties skipped")
            + (facetViolations == 0 ? "" : ", \(facetViolations) values beyond their MaxLength/Precision/Scale kept")
            + (streamsDownloaded == 0 ? "" : ", \(streamsDownloaded) streams downloaded (\(streamBytes) bytes)")
            + (streamsFailed == 0
                ? ""
                : ", \(streamsFailed) streams not downloaded (\(requests.flatMap(\.streamProblems).prefix(3).joined(separator: "; ")))")
            + (missing == 0
                ? ""
                : "; \(missing) counted by the service but not sent (paging while it changed): nothing removed, read in full next time")
    }
}

/// Where a refresh is, for a progress line.
public struct RefreshProgress: Sendable, Hashable {
    public var request: String
    public var mode: RefreshReport.Mode
    public var pages: Int
    public var received: Int
    /// Bytes of response bodies read for this request so far.
    public var bytes: Int
    /// Top-level entities of this read so far (`received` counts expanded ones too); nil in a
    /// report that does not say.
    public var topLevel: Int? = nil
    /// The service's count of the collection a full read pages through (asked on its first
    /// page): what `topLevel` reaches at the end. Nil for a delta, or a service that does not count.
    public var expected: Int? = nil
}

/// Why a refresh stopped. What it wrote before stays: each group of pages (each chunk of a delta)
/// is its own transaction, and the next refresh converges.
public enum RefreshError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The service answered a read with an error status.
    case service(request: String, status: Int, message: String)
    /// No defining request of that name.
    case unknownRequest(String)
    /// Another refresh (or define, undefine) of this store is running, in this process or another.
    case alreadyRunning
    /// Neither an argument nor the configuration gives the service root.
    case noServiceRoot
    /// The service's answer cannot be used (a next link that repeats, …).
    case badResponse(request: String, message: String)

    public var description: String {
        switch self {
        case .service(let r, let s, let m): "refresh of '\(r)': the service answered \(s): \(m)"
        case .unknownRequest(let n): "no defining request named '\(Membership.quoted(n))'"
        case .alreadyRunning:
            "a refresh, define or undefine of this store is already running (in this process or another); try again when it ends"
        case .noServiceRoot:
            "no service root: give one (--service URL) or set \"serviceRoot\" in the store's configuration"
        case .badResponse(let r, let m): "refresh of '\(r)': \(m)"
        }
    }
}
