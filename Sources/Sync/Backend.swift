package import Queue
package import Storage

/// What flush and refresh need from an OData service, in OData's terms: changes to send, entities
/// and pages to read, and what the service meant by its answers. `Remote.ODataBackend` is the real
/// one — it renders these in the service's dialect (V4, or V2 such as SAP Gateway) and unwraps what
/// comes back; the algorithms in this module never see an HTTP header, a URL literal or a dialect.
package protocol Backend: Sendable {
    /// The service root, ending in `/` (`http://127.0.0.1:8080/`).
    var serviceRoot: String { get }
    /// What the service offers that flush's choices depend on.
    var capabilities: BackendCapabilities { get }
    /// Sends `changes` as one round trip (a `$batch`; one at a time to a service without one):
    /// those with the same `group` are one atomicity group (a change set). A change `inside`
    /// another goes inline in that create's body (a deep insert), and its answer is the entity the
    /// create's answer holds for it (read back with the create's entity when the answer holds
    /// none), or, when the create failed, 424 with the create's error. One answer per change,
    /// in order (a change set that failed answers every member with its one error). `extra`:
    /// pass-through headers the caller configured (an `Authorization`, say). Throws
    /// `BackendError.transport` when no answer came (the changes may or may not have been
    /// applied) and `BackendError.badResponse` when the round trip itself was refused or its
    /// answer cannot be read.
    func send(_ changes: [OutgoingChange], extra: [(String, String)]) async throws -> [ChangeAnswer]
    /// Reads one entity: by its key, or at the address a create's answer gave.
    func read(_ entity: EntityAddress, extra: [(String, String)]) async throws -> ChangeAnswer
    /// Reads one page of a collection (a defining request, a next link, a delta link).
    func read(_ page: PageRequest, extra: [(String, String)]) async throws -> PageAnswer
    /// Reads the entities of `set` whose `property` equals `value` — at most `limit` (a create
    /// marker's look-up: one entity expected, two mean it was applied twice). Each answer holds
    /// one entity, unwrapped, with its ETag; an answer that is not a success (or not a
    /// collection) is one answer with that status.
    func find(
        set: String, property: String, equals value: Value, limit: Int, extra: [(String, String)]
    )
        async throws -> [ChangeAnswer]
    /// Reads one stream's bytes into `sink` (a media resource: `name` ""; a stream property: its
    /// name) — at `link` (its read link) when given, else at the conventional `Set(key)/$value`
    /// or `Set(key)/Name`. A success is written to `sink` as it arrives, never held whole; any
    /// other answer is returned with the start of its body. Throws as `read` does.
    func download(
        set: String, key: [Value], keyText: String, name: String, link: String?, into sink: any StreamSink,
        extra: [(String, String)]
    ) async throws -> StreamAnswer
}

/// Where an upload's bytes come from, read in pieces at the offsets asked (a store's
/// `StreamFile`): never held whole.
package protocol StreamSource: Sendable {
    /// Its length in bytes.
    var size: Int { get }
    /// Fills `buffer` from `offset`; returns how many bytes it put there, 0 at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws -> Int
}

extension StreamFile: StreamSource {}

extension StreamDigest: StreamSink {}

/// Where a download's bytes go as they arrive (a store's `IncomingStream`). `restart` comes
/// before the first byte of each attempt: a download tried again starts over.
package protocol StreamSink: AnyObject, Sendable {
    func restart() throws
    func append(_ bytes: UnsafeRawBufferPointer) throws
}

/// The answer to a stream's download: its status and headers (the bytes went to the sink).
package struct StreamAnswer: Sendable {
    package var status: Int
    package var contentType: String?
    package var etag: String?
    /// The start of the body of an answer that is not a success (the service's message).
    package var message: String

    package init(status: Int, contentType: String?, etag: String?, message: String = "") {
        self.status = status
        self.contentType = contentType
        self.etag = etag
        self.message = message
    }

    package var isSuccess: Bool { (200..<300).contains(status) }
}

/// What a service offers, as far as flush's choices go.
package struct BackendCapabilities: Sendable, Hashable {
    /// Whether a request inside a round trip can be made to wait for another outside its own
    /// atomicity group (V4 JSON `$batch` `dependsOn`; a V2 `$batch` cannot).
    package var dependenciesAcrossGroups: Bool
    /// Whether a create carries only the properties it sets, the service giving the others their
    /// defaults (both dialects: V2's SAP Gateway refuses what it computes; a V4 service that
    /// dropped a property from its `$metadata` refuses it even as null) — rather than the whole
    /// entity with nulls where unset.
    package var createCarriesOnlySetProperties: Bool
    /// Whether a request in a change set can name the entity an earlier create of the same change
    /// set made, by its `Content-ID` (`$1`, `$1/Items`): a create whose key the service assigns
    /// and what needs its key then go in one change set (`StoreConfiguration.contentIDReferences`).
    package var contentIDReferences: Bool

    package init(dependenciesAcrossGroups: Bool, createCarriesOnlySetProperties: Bool, contentIDReferences: Bool) {
        self.dependenciesAcrossGroups = dependenciesAcrossGroups
        self.createCarriesOnlySetProperties = createCarriesOnlySetProperties
        self.contentIDReferences = contentIDReferences
    }

    /// An OData V4 service (OData 4.01 Part 1 §11.7.7.1: a change set's requests may reference
    /// an entity an earlier one created by `$` and its Content-ID).
    package static let v4 = BackendCapabilities(
        dependenciesAcrossGroups: true, createCarriesOnlySetProperties: true, contentIDReferences: true)
    /// An OData V2 service (SAP Gateway): Content-ID references only where configured.
    package static let v2 = BackendCapabilities(
        dependenciesAcrossGroups: false, createCarriesOnlySetProperties: true, contentIDReferences: false)
}

/// One queued request as it goes to the service: what it means, not how the dialect writes it.
package struct OutgoingChange: Sendable {
    package enum Kind: Sendable, Hashable {
        /// A new entity; `properties` is the whole entity.
        case create
        /// A partial update: `properties` holds the changed properties only.
        case update
        /// A replacement of the whole entity.
        case replace
        case delete
        /// A stream's bytes replaced (`stream` says which and holds them).
        case putStream
        /// A media entity created from its bytes (`stream` holds them, and the `Slug`).
        case createMedia
        /// A link added or removed (`link` names it).
        case link
        case unlink
        /// An operation called (`call` says which, with its parameters): on the entity (`set`,
        /// `key`) when bound; `set` "" when unbound.
        case call
    }

    package var kind: Kind
    /// The entity set.
    package var set: String
    /// The entity's key values, in the key's order (for a create with a local key: the local ones).
    package var key: [Value]
    /// The key predicate as the store writes it (`'HT-1000'`, `SalesOrderID='1',ItemPosition='10'`).
    package var keyText: String
    /// The body as the store queued it: a JSON object of the properties (nil: none).
    package var body: String?
    /// Properties of a create the service assigns (a local key's values): left out of what is sent.
    package var serviceAssigned: Set<String>
    /// The ETag the change must match (nil: none known, or a create).
    package var etag: String?
    /// The request's identity, the same on every attempt: its repeatability id and when it was
    /// first sent.
    package var repeatabilityID: EDMGuid
    package var firstSent: EDMDateTimeOffset
    /// The headers the user gave the request (`customHeaders`), sorted by name.
    package var customHeaders: [(String, String)]
    /// Its atomicity group inside the round trip (nil: none).
    package var group: String?
    /// Its id inside the round trip (unique in it).
    package var id: String
    /// Ids of earlier changes of the round trip (outside its group) that must succeed first.
    package var dependsOn: [String]
    /// Whether the entity's key is a local one the service replaces with its own.
    package var localKey: Bool
    /// The entity an earlier create of the same change set made, which this change addresses by
    /// that create's `id` (its Content-ID) because the service has not given its key yet: the
    /// change goes to `$<id>` (a change of that very entity) or, for a create under it, to
    /// `$<id>/<navigation>` — its foreign key to the parent left out (in `serviceAssigned`).
    package var parent: ContentIDReference?
    /// A create that goes inline in an earlier create of the round trip (a deep insert), not as a
    /// request of its own: that create's `id` and the navigation property it goes under. Its
    /// answer is the part of that create's answer about it (`Backend.send`).
    package var inside: ContentIDReference?
    /// The stream a `putStream` replaces, with its bytes; nil for the other kinds.
    package var stream: OutgoingStream?
    /// The link a `link` or `unlink` changes; nil for the other kinds.
    package var link: OutgoingLink?
    /// The operation a `call` calls; nil for the other kinds.
    package var call: OutgoingCall?

    /// Whether the key of the entity this change makes or changes may be known only from its
    /// answer: it names or goes under an entity an earlier create of its change set made, whose
    /// key the service may assign (`parent`, `inside`).
    package var keyFromAnswer: Bool { parent != nil || inside != nil }

    package init(
        kind: Kind, set: String, key: [Value], keyText: String, body: String?, serviceAssigned: Set<String> = [],
        etag: String?, repeatabilityID: EDMGuid, firstSent: EDMDateTimeOffset, customHeaders: [(String, String)],
        group: String? = nil, id: String, dependsOn: [String] = [], localKey: Bool = false
    ) {
        (self.kind, self.set, self.key, self.keyText, self.body) = (kind, set, key, keyText, body)
        (self.serviceAssigned, self.etag, self.repeatabilityID, self.firstSent) =
            (serviceAssigned, etag, repeatabilityID, firstSent)
        (self.customHeaders, self.group, self.id, self.dependsOn, self.localKey) =
            (customHeaders, group, id, dependsOn, localKey)
    }
}

/// An operation call (`OutgoingChange.Kind.call`): what the dialect needs to write it.
package struct OutgoingCall: Sendable {
    /// Qualified for V4 (`Lib.Renew`, what a bound call appends to the entity's path); the
    /// import's name for V2.
    package var operation: String
    /// Where an unbound operation is reached at the service root; nil when bound.
    package var importName: String?
    /// An action (changes data), or a function.
    package var isAction: Bool
    /// The method the operation declares (V2 `m:HttpMethod`).
    package var httpMethod: String
    /// The parameters, in order, with their types.
    package var parameters: [(name: String, value: Value, type: TypeRef)]

    package init(
        operation: String, importName: String?, isAction: Bool, httpMethod: String,
        parameters: [(name: String, value: Value, type: TypeRef)]
    ) {
        (self.operation, self.importName, self.isAction, self.httpMethod, self.parameters) =
            (operation, importName, isAction, httpMethod, parameters)
    }
}

/// The bytes of a stream replacement (`OutgoingChange.Kind.putStream`), and where they go.
package struct OutgoingStream: Sendable {
    /// "" for a media entity's media resource (`$value`), else the stream property.
    package var name: String
    package var contentType: String
    /// Where the service takes the bytes (`@odata.mediaEditLink`, V2 `edit_media`); nil: the
    /// conventional `Set(key)/$value` or `Set(key)/Name`.
    package var editLink: String?
    /// The bytes, read in pieces as they go.
    package var bytes: any StreamSource
    /// A media create's `Slug` header (nil: none).
    package var slug: String?

    package init(name: String, contentType: String, editLink: String?, bytes: any StreamSource) {
        (self.name, self.contentType, self.editLink, self.bytes) = (name, contentType, editLink, bytes)
    }
}

/// The link a `link` or `unlink` change adds or removes: from the change's entity, over
/// `navigation`, to the entity `targetKeyText` of `targetSet`.
package struct OutgoingLink: Sendable, Hashable {
    package var navigation: String
    package var targetSet: String
    package var targetKey: [Value]
    package var targetKeyText: String
    /// Whether the navigation is collection-valued (a single-valued one's link is set with PUT).
    package var collection: Bool
    /// The service root the target's URL is made absolute with (set by the backend).
    package var serviceRoot = ""

    package init(navigation: String, targetSet: String, targetKey: [Value], targetKeyText: String, collection: Bool) {
        (self.navigation, self.targetSet, self.targetKey, self.targetKeyText, self.collection) =
            (navigation, targetSet, targetKey, targetKeyText, collection)
    }
}

/// A reference to the entity an earlier create of the same change set made (`OutgoingChange.parent`).
package struct ContentIDReference: Sendable, Hashable {
    /// The create's `OutgoingChange.id` (its Content-ID).
    package var change: String
    /// The navigation property from that entity to this one (a create under it); nil for a change
    /// of that entity itself.
    package var navigation: String?

    package init(change: String, navigation: String?) { (self.change, self.navigation) = (change, navigation) }

    /// `$<change>` or `$<change>/<navigation>`.
    package var url: String { "$" + change + (navigation.map { "/" + $0 } ?? "") }
}

/// Where to read one entity.
package enum EntityAddress: Sendable {
    /// By set and key (`keyText` as the store writes it).
    case key(set: String, key: [Value], keyText: String)
    /// At an address the service gave (a create's `Location`), of an entity of `set`.
    case address(String, set: String)
}

/// What the service answered to a change or an entity read, unwrapped from its dialect.
package struct ChangeAnswer: Sendable {
    package var status: Int
    /// The entity the answer carries (V2's `d` already taken off); nil when the body is empty.
    package var entity: JSON?
    /// Why the body, not empty, could not be read as the entity.
    package var unreadable: String?
    /// The entity's ETag as the answer states it (the `ETag` header).
    package var etag: String?
    /// The ETag the entity carries inside the body (V4 `@odata.etag`, V2 `__metadata.etag`).
    package var entityETag: String?
    /// Where the created entity is (`Location` or `OData-EntityId`).
    package var location: String?
    /// The service's messages with a successful answer (SAP's `sap-message`), one line each:
    /// `warning V1/302: text (target X)`.
    package var messages: [String]
    /// The service's error, for an answer that is not a success.
    package var error: ServiceError
    /// How the service says it handled the change's repeatability (nil: it said nothing).
    package var repeatability: RepeatabilityResult?
    /// The answer is not the service's to a change but the entity a create's marker found: the
    /// create was applied before (its answer lost) and was not sent again.
    package var foundByMarker = false
    /// Of an answer `foundByMarker`: the marker found more than one entity.
    package var foundTwice = false
    /// The answer to a create that was looked up by its marker before it was sent again, and
    /// not found: the service did not hold it, so this answer is its only application.
    package var notFoundByMarker = false

    package init(
        status: Int, entity: JSON? = nil, unreadable: String? = nil, etag: String? = nil, entityETag: String? = nil,
        location: String? = nil, messages: [String] = [], error: ServiceError? = nil
    ) {
        (self.status, self.entity, self.unreadable, self.etag, self.entityETag) =
            (status, entity, unreadable, etag, entityETag)
        (self.location, self.messages) = (location, messages)
        self.error = error ?? ServiceError(httpStatus: status, message: "HTTP \(status)")
    }

    package var isSuccess: Bool { (200..<300).contains(status) }
}

/// What a service says of a repeatable change (OASIS `Repeatability-Result`, SAP Gateway's
/// `RepeatabilityResult`).
package enum RepeatabilityResult: Sendable, Hashable {
    /// Executed once, however often it was sent: the answer is the first execution's.
    case accepted
    /// The service refused to treat it as repeatable (an answer that is an error).
    case rejected
    /// The service does not deduplicate repeated requests.
    case unsupported
}

/// One read of a page for refresh.
package struct PageRequest: Sendable, Hashable {
    /// Relative to the service root (a defining request, a kept delta link) or absolute (a next link).
    package var url: String
    /// Ask for a delta link (change tracking).
    package var trackChanges: Bool
    /// Entities a page should hold at most (nil: the service's own paging).
    package var pageSize: Int?
    /// Ask the service to count the collection.
    package var count: Bool

    package init(url: String, trackChanges: Bool, pageSize: Int? = nil, count: Bool = false) {
        (self.url, self.trackChanges, self.pageSize, self.count) = (url, trackChanges, pageSize, count)
    }
}

/// A page as the service answered it: its body is read by `PayloadReader`.
package struct PageAnswer: Sendable {
    package var status: Int
    /// The body, unless it is `spooled`.
    package var body: [UInt8]
    /// A large page: the body is in this unlinked temporary file, and `body` is empty.
    package var spooled: LoadInput?
    /// Whether the service says the delta (link) it gives covers every set the request's `$expand`
    /// reaches.
    package var deltaFollowsExpand: Bool

    package init(status: Int, body: [UInt8] = [], spooled: LoadInput? = nil, deltaFollowsExpand: Bool = false) {
        (self.status, self.body, self.spooled, self.deltaFollowsExpand) = (status, body, spooled, deltaFollowsExpand)
    }

    /// Bytes in the body.
    package var size: Int { spooled?.size ?? body.count }

    /// The body's first `count` bytes at most (from the file, when it is spooled): enough to
    /// quote in an error.
    package func head(_ count: Int) -> [UInt8] {
        guard let spooled else { return Array(body.prefix(count)) }
        var out = [UInt8](repeating: 0, count: min(count, spooled.size ?? count))
        let n = (try? out.withUnsafeMutableBytes { try spooled.read(into: $0, at: 0) }) ?? 0
        return Array(out.prefix(n))
    }

    /// The body's last `count` bytes at most (from the file, when it is spooled).
    package func tail(_ count: Int) -> [UInt8] {
        guard let spooled else { return Array(body.suffix(count)) }
        guard let size = spooled.size else { return [] }
        let start = max(0, size - count)
        var out = [UInt8](repeating: 0, count: size - start)
        let n = (try? out.withUnsafeMutableBytes { try spooled.read(into: $0, at: start) }) ?? 0
        return Array(out.prefix(n))
    }

    /// An `EntityObjectStream` over the body, wherever it is.
    package func stream() -> EntityObjectStream {
        if let spooled {
            return EntityObjectStream(rereadable: true) { buffer, offset in try spooled.read(into: buffer, at: offset) }
        }
        return EntityObjectStream(bytes: body)
    }
}

package enum BackendError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No answer: the request may or may not have reached the service.
    case transport(String)
    /// No connection could be made (refused, or none within the connect timeout): nothing was
    /// sent, so a flush leaves its requests as they were (not sent, no attempt counted).
    case unreachable(String)
    /// An answer this client cannot read (not JSON where JSON was due, a batch without a response
    /// per request).
    case badResponse(String)
    /// An absolute URL (a next or delta link, a `Location`) outside the service root's origin:
    /// not followed, nothing sent to it.
    case otherOrigin(url: String, serviceRoot: String)

    package var description: String {
        switch self {
        case .otherOrigin(let url, let root):
            "the service sent a link to another origin, which is not followed (credentials go only to \(root)): \(url.prefix(300))"
        case .transport(let m): "no answer from the service: \(m)"
        case .unreachable(let m): "the service cannot be reached (nothing was sent): \(m)"
        case .badResponse(let m): "unreadable answer from the service: \(m)"
        }
    }
}
