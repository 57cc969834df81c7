import Foundation
package import Storage

/// One pending local change: a row of the `RequestQueue` set.
package struct RequestRecord: Sendable, Hashable {
    package enum Method: String, Sendable, CaseIterable {
        case create = "POST"
        case update = "PATCH"
        case replace = "PUT"
        case delete = "DELETE"
        /// A stream's bytes replaced (`PUT Set(key)/$value` or `PUT Set(key)/Name`): the body is a
        /// `StreamChange` naming the file that holds them.
        case putStream = "PUT-STREAM"
        /// A media entity created with its bytes (`POST Set` with the bytes as the body and a
        /// `Slug`): the body is a `StreamChange`; the entity's other properties follow as a PATCH.
        case createMedia = "POST-MEDIA"
        /// A link added (`POST Set(key)/Nav/$ref`; `PUT` for a single-valued navigation; V2
        /// `$links`): the body is a `LinkChange`.
        case link = "POST-REF"
        /// A link removed (`DELETE Set(key)/Nav/$ref`): the body is a `LinkChange`.
        case unlink = "DELETE-REF"
        /// An operation called (a V4 action, a V2 function import called with POST): the body is
        /// an `OperationCall`. Bound to the record's entity, or unbound (`entitySet` "").
        case call = "CALL"

        /// A change of a link (`link`, `unlink`).
        package var isLinkChange: Bool { self == .link || self == .unlink }

        /// A create of an entity: JSON (`create`) or a media entity's bytes (`createMedia`).
        package var isCreate: Bool { self == .create || self == .createMedia }

        /// A request whose body is a stream's bytes: it goes in a round trip of its own.
        package var carriesStream: Bool { self == .putStream || self == .createMedia }

        /// The code kept in `q/by-entity` (`QueueRole.ByEntityCode` reads it back).
        var code: UInt8 {
            switch self {
            case .create: QueueRole.ByEntityCode.create
            case .update: 2
            case .replace: 3
            case .delete: 4
            case .putStream: 5
            case .createMedia: QueueRole.ByEntityCode.createMedia
            case .link: 7
            case .unlink: 8
            case .call: 9
            }
        }

        init?(code: UInt8) {
            guard let m = Self.allCases.first(where: { $0.code == code }) else { return nil }
            self = m
        }
    }

    package enum Status: String, Sendable, CaseIterable {
        /// Waiting for the next flush.
        case pending
        /// Sent at least once; the answer may not have come back. Never merged again.
        case sent
        /// Refused by the service; in ErrorArchive until resolved.
        case error

        var code: UInt8 {
            switch self {
            case .pending: 0
            case .sent: 1
            case .error: QueueRole.ByEntityCode.error
            }
        }

        init?(code: UInt8) {
            guard let s = Self.allCases.first(where: { $0.code == code }) else { return nil }
            self = s
        }
    }

    package var id: Int64
    package var method: Method
    package var entitySet: String
    /// The key as in a URL (`'HT-1000'`, `A=1,B='x'`), for people and `$filter`.
    package var entityKey: String
    /// The key tuple as the store encodes it (exact).
    package var keyBytes: [UInt8]
    /// The entity (POST, PUT) or its changed properties (PATCH), as OData JSON; nil for DELETE; a
    /// `StreamChange` for PUT-STREAM.
    package var body: String?
    package var customTag: String?
    package var customHeaders: [String: String]
    package var transactionID: String?
    package var uploadCategory: String?
    package var repeatabilityID: EDMGuid
    package var createdAt: EDMDateTimeOffset
    package var status: Status
    package var attempts: Int
    /// Requests that must reach the service first (the creates of entities this one refers to).
    package var dependencies: [Int64]
    package var nonMergeable: Bool
    /// The key was made locally; the service assigns the real one.
    package var localKey: Bool
    /// When flush first sent the request (set by `markSent` on the first attempt, kept after):
    /// its `Repeatability-First-Sent`. Nil until then, and in records written before the field.
    package var firstSentAt: EDMDateTimeOffset?
    /// A create whose entity leaves the store once it is applied (`ChangeOptions.removeAfterUpload`).
    package var removeAfterUpload = false
    /// A create of a deep insert (`RequestQueue.applyDeep`): flush sends it with the creates under
    /// it, in its transaction, as one POST with them inline.
    package var deepInsert = false

    /// As a row of `RequestQueue`.
    package var properties: Properties {
        var p: Properties = [
            "RequestID": .int(id), "Method": .string(method.rawValue), "EntitySet": .string(entitySet),
            "EntityKey": .string(entityKey), "KeyBytes": .binary(keyBytes), "RepeatabilityID": .guid(repeatabilityID),
            "CreatedAt": .dateTimeOffset(createdAt), "Status": .string(status.rawValue),
            "Attempts": .int(Int64(attempts)),
            "NonMergeable": .bool(nonMergeable), "LocalKey": .bool(localKey),
        ]
        if let body { p["Body"] = .string(body) }
        if let customTag { p["CustomTag"] = .string(customTag) }
        if !customHeaders.isEmpty {
            let object = JSON.object(customHeaders.keys.sorted().map { ($0, .string(customHeaders[$0]!)) })
            p["CustomHeaders"] = .string(object.text)
        }
        if let transactionID { p["TransactionID"] = .string(transactionID) }
        if let uploadCategory { p["UploadCategory"] = .string(uploadCategory) }
        if !dependencies.isEmpty { p["Dependencies"] = .collection(dependencies.map { .int($0) }) }
        if let firstSentAt { p["FirstSentAt"] = .dateTimeOffset(firstSentAt) }
        if removeAfterUpload { p["RemoveAfterUpload"] = .bool(true) }
        if deepInsert { p["DeepInsert"] = .bool(true) }
        return p
    }

    package init(
        id: Int64, method: Method, entitySet: String, entityKey: String, keyBytes: [UInt8], body: String?,
        options: ChangeOptions, repeatabilityID: EDMGuid, createdAt: EDMDateTimeOffset, dependencies: [Int64],
        localKey: Bool
    ) {
        self.id = id
        self.method = method
        self.entitySet = entitySet
        self.entityKey = entityKey
        self.keyBytes = keyBytes
        self.body = body
        self.customTag = options.customTag
        self.customHeaders = options.customHeaders
        self.transactionID = options.transactionID
        self.uploadCategory = options.uploadCategory
        self.repeatabilityID = repeatabilityID
        self.createdAt = createdAt
        self.status = .pending
        self.attempts = 0
        self.dependencies = dependencies
        self.nonMergeable = options.nonMergeable
        self.localKey = localKey
        self.firstSentAt = nil
        self.removeAfterUpload = options.removeAfterUpload && method == .create
        self.deepInsert = options.deepInsert && method == .create
    }

    /// Reads a `RequestQueue` row back. Throws `EntityError.corruptRow`-style errors for a row that
    /// is not a record.
    package init(_ p: Properties) throws(EntityError) {
        func string(_ n: String) throws(EntityError) -> String {
            guard case .string(let s)? = p[n] else { throw .badInput("request record: \(n) is missing") }
            return s
        }
        func optional(_ n: String) -> String? {
            if case .string(let s)? = p[n] { return s }
            return nil
        }
        guard case .int(let id)? = p["RequestID"], case .binary(let key)? = p["KeyBytes"],
            case .guid(let rid)? = p["RepeatabilityID"], case .dateTimeOffset(let at)? = p["CreatedAt"],
            case .int(let attempts)? = p["Attempts"]
        else {
            throw .badInput("request record: a required field is missing")
        }
        guard let method = Method(rawValue: try string("Method")) else {
            throw .badInput("request record \(id): unknown method")
        }
        guard let status = Status(rawValue: try string("Status")) else {
            throw .badInput("request record \(id): unknown status")
        }
        var headers: [String: String] = [:]
        if let text = optional("CustomHeaders") {
            guard case .object(let members)? = try? JSON.parse(text) else {
                throw .badInput("request record \(id): CustomHeaders is not a JSON object")
            }
            for (k, v) in members {
                guard case .string(let s) = v else {
                    throw .badInput("request record \(id): header \(k) is not a string")
                }
                headers[k] = s
            }
        }
        var deps: [Int64] = []
        if case .collection(let items)? = p["Dependencies"] {
            for case .int(let d) in items { deps.append(d) }
        }
        self.id = id
        self.method = method
        self.entitySet = try string("EntitySet")
        self.entityKey = try string("EntityKey")
        self.keyBytes = key
        self.body = optional("Body")
        self.customTag = optional("CustomTag")
        self.customHeaders = headers
        self.transactionID = optional("TransactionID")
        self.uploadCategory = optional("UploadCategory")
        self.repeatabilityID = rid
        self.createdAt = at
        self.status = status
        self.attempts = Int(attempts)
        self.dependencies = deps
        self.nonMergeable = p["NonMergeable"] == .bool(true)
        self.localKey = p["LocalKey"] == .bool(true)
        if case .dateTimeOffset(let at)? = p["FirstSentAt"] { self.firstSentAt = at } else { self.firstSentAt = nil }
        self.removeAfterUpload = p["RemoveAfterUpload"] == .bool(true)
        self.deepInsert = p["DeepInsert"] == .bool(true)
    }
}

/// What a caller may attach to a local change.
public struct ChangeOptions: Sendable, Hashable {
    /// Free text kept with the request (SAP's custom tag); merged requests join theirs with `#`.
    public var customTag: String?
    /// Headers sent with the request; merged requests merge them, the later value winning.
    public var customHeaders: [String: String]
    /// Requests with the same transaction id go to the service as one change set (all or nothing).
    public var transactionID: String?
    /// Flush can be limited to one category.
    public var uploadCategory: String?
    /// Never merge this request with another (request-queue optimization skips it).
    public var nonMergeable: Bool
    /// For a create (SAP's `OfflineOData.RemoveAfterUpload`): once the service has applied it and
    /// nothing else is queued for the entity, the entity leaves this store — data the app sends
    /// but need not keep (a log entry, a reading). A defining request that covers it brings the
    /// service's copy back on the next refresh.
    public var removeAfterUpload: Bool
    /// Set by `RequestQueue.applyDeep` on the creates of a deep insert (not an option of its own).
    package var deepInsert = false

    public init(
        customTag: String? = nil, customHeaders: [String: String] = [:], transactionID: String? = nil,
        uploadCategory: String? = nil, nonMergeable: Bool = false, removeAfterUpload: Bool = false
    ) {
        self.customTag = customTag
        self.customHeaders = customHeaders
        self.transactionID = transactionID
        self.uploadCategory = uploadCategory
        self.nonMergeable = nonMergeable
        self.removeAfterUpload = removeAfterUpload
    }
}
