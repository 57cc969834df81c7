package import LMDB
public import Queue
package import Storage

/// The sync role's settings: the service it talks to, what it reads (defining requests), how it
/// authenticates, waits, pages and sends. They are members of the store's configuration JSON
/// (the DocC article "Configuration"); storage keeps them as written (`StorageSettings.roles`)
/// and the sync role reads and checks them here. Held by a program through
/// `StoreConfiguration`, which forwards each of them.
public struct SyncSettings: Sendable, Hashable {
    public struct DefiningRequest: Sendable, Hashable {
        public var name: String
        public var url: String
        /// Whether a refresh downloads the streams of the entities it reads — media resources and
        /// stream properties — new and changed ones only (SAP's `automaticallyRetrievesStreams`;
        /// JSON `"retrieveStreams"`, `.ini` `automatically_retrieves_streams`). Default false: the
        /// store then knows each stream's content type, media ETag and links, not its bytes, and
        /// `OfflineStore.fetchStream` brings one on demand.
        public var retrieveStreams: Bool
        public init(name: String, url: String, retrieveStreams: Bool = false) {
            self.name = name
            self.url = url
            self.retrieveStreams = retrieveStreams
        }
    }

    public var serviceRoot: String?
    public var definingRequests: [DefiningRequest] = []
    /// How `flush` and `refresh` authenticate to the service (`"authentication"`), or nil for no
    /// credentials of the configuration's own. It names where the secret is read, never the
    /// secret itself; the credentials go only to `serviceRoot`'s origin.
    public var authentication: Authentication?
    /// URL parameters every request to the service carries (`"queryParameters": {"sap-client":
    /// "100"}`): SAP Gateway picks the client, the language (`sap-language`) from them. Names
    /// must not start with `$` (system query options belong in the request).
    public var queryParameters: [String: String] = [:]
    /// Whether the service takes `$batch` (default true). A service that does not
    /// (`"supportsBatch": false`) gets one request at a time: flush sends them in order, and a
    /// transaction's requests are then not atomic — after one is refused the rest of its
    /// transaction is not sent, but those before it stay applied.
    public var supportsBatch = true
    /// Rows (entities, expanded ones included, and removals) a refresh's full read writes in one
    /// transaction (`"refreshGroupRows"`, default 5,000; 100 to 1,000,000). Larger groups commit
    /// less often: a set with an index on a property whose values come in no particular order
    /// (a quantity, a date) is refreshed faster, because each commit copies the index leaves its
    /// rows landed on, and fewer commits copy them fewer times. They cost memory (the group's
    /// changed pages and the parsed rows waiting for it) and make a local write wait longer for
    /// the group ahead of it; the DocC article "Refresh and defining requests" has the figures.
    public var refreshGroupRows = SyncSettings.defaultRefreshGroupRows
    /// How long `refresh` and `flush` wait for the service (`"timeouts"`, whole seconds, each
    /// from 1 to 86,400): `request` bounds one exchange whole, its answer's body included
    /// (default 60); `idle`, the silence between an answer's bytes (30); `connect`, making a
    /// connection (10). A service slow to begin a large answer (an SAP Gateway `$expand` over many
    /// entities) needs a longer `idle`; one whose answers are large and unpaged, a longer `request`.
    public var timeouts = Timeouts()
    /// Entity set → the property a create of it carries its request's identity in
    /// (`"createMarkers": {"SalesOrderSet": "Note"}`), for sets whose key the service assigns on
    /// a service that does not deduplicate repeated requests. Flush writes the request's
    /// repeatability id into it (32 hexadecimal digits; a GUID property gets the GUID itself),
    /// replacing what the create held, and before it sends again a create whose answer was lost,
    /// reads the set by it: found, the create is settled with the entity found instead of being
    /// applied twice. The property must be a string of at least 32 characters or a GUID, not a
    /// key and not computed; it is the store's, so choose one kept for a client reference.
    public var createMarkers: [String: String] = [:]
    /// Whether the service resolves `$<Content-ID>` references inside a change set
    /// (`"contentIDReferences"`; nil, the default: yes for OData V4, which requires it, no for V2,
    /// where SAP Gateway services differ). With them, a transaction holding a create whose key the
    /// service assigns and a request that needs that key (an item under its new header) goes as
    /// one change set: the item is created under `$<id>/<navigation>`. Without them such a
    /// transaction is refused whole at flush (ErrorArchive) unless `splitTransactions`.
    public var contentIDReferences: Bool?
    /// Whether flush may send a transaction in two round trips when it cannot go as one change
    /// set (`"splitTransactions"`, default false): the part that needs a key the service assigns
    /// goes after the answer that brings it — not atomic: a refusal of the second part leaves the
    /// first applied. Off, such a transaction is refused whole, never half applied.
    public var splitTransactions = false
    /// What a stream replacement's `If-Match` carries (`"streamIfMatch"`): `media` (the default)
    /// the service's media ETag of the version replaced, as OData 4.01 Part 1 §11.4.7.2 says, or
    /// `entity` the entity's ETag, for a service that checks a stream's `If-Match` against its
    /// entity's (odatapy 5.3.0 answers 412 to the media ETag its own GET gives). Either way a
    /// stream the service changed since is a conflict, never overwritten.
    public var streamIfMatch: StreamIfMatch = .media

    /// What a stream replacement's `If-Match` carries (`streamIfMatch`).
    public enum StreamIfMatch: String, Sendable, Hashable {
        case media
        case entity
    }
    /// Whether the service takes deep inserts (`"deepInsert"`, default false): a transaction that
    /// cannot go as one change set for want of Content-ID references, made of a create and creates
    /// under it by navigation properties with referential constraints (an order and its items),
    /// goes as one POST with the items inline instead of being refused. A deep insert made as one
    /// (`NewEntity`, JSON with inline entities) goes as one whatever this says.
    public var deepInsert = false
    /// What flush does, without a person, when the service refuses a change of an entity of a set
    /// because it changed there first (412) (`"conflictPolicies": {"Products": "server-wins"}`;
    /// a set not named: `manual`). `manual`: the conflict waits in the ErrorArchive, both
    /// versions kept; `server-wins`: the change is given up and the service's version adopted;
    /// `client-wins`: the change is sent again against the service's version (at most
    /// `maxClientWinsAttempts` attempts; then it waits as `manual`).
    public var conflictPolicies: [String: ConflictPolicy] = [:]
    /// See `conflictPolicies` (defined with the conflicts it settles, in Queue).
    public typealias ConflictPolicy = Queue.ConflictPolicy

    /// The `"timeouts"` member: see `timeouts`.
    public struct Timeouts: Sendable, Hashable {
        public var requestSeconds = 60
        public var idleSeconds = 30
        public var connectSeconds = 10
        public static let range = 1...86_400

        public init(requestSeconds: Int = 60, idleSeconds: Int = 30, connectSeconds: Int = 10) {
            (self.requestSeconds, self.idleSeconds, self.connectSeconds) = (requestSeconds, idleSeconds, connectSeconds)
        }

        init(json: JSON) throws(EntityError) {
            guard case .object(let members) = json else {
                throw .badInput(#"configuration: timeouts must be an object such as {"idle": 120}"#)
            }
            var seen = Set<String>()
            for (name, value) in members {
                guard seen.insert(name).inserted else {
                    throw .badInput("configuration: timeouts.\(name) is given twice")
                }
                guard case .number(let text) = value, let n = Int(text), Self.range.contains(n) else {
                    throw .badInput(
                        "configuration: timeouts.\(name) must be a whole number of seconds from \(Self.range.lowerBound) to \(Self.range.upperBound)"
                    )
                }
                switch name {
                case "request": requestSeconds = n
                case "idle": idleSeconds = n
                case "connect": connectSeconds = n
                default: throw .badInput("configuration: unknown timeout '\(name)' (request, idle, connect)")
                }
            }
        }

        var json: JSON {
            .object([
                ("request", .number(String(requestSeconds))), ("idle", .number(String(idleSeconds))),
                ("connect", .number(String(connectSeconds))),
            ])
        }
    }

    public static let defaultRefreshGroupRows = 5_000
    public static let refreshGroupRowsRange = 100...1_000_000

    public init(
        serviceRoot: String? = nil, definingRequests: [DefiningRequest] = [], authentication: Authentication? = nil
    ) {
        self.serviceRoot = serviceRoot
        self.definingRequests = definingRequests
        self.authentication = authentication
    }

    /// The configuration members that are the sync role's.
    package static let members: Set<String> = [
        "serviceRoot",
        "definingRequests",
        "authentication",
        "queryParameters",
        "supportsBatch",
        "refreshGroupRows",
        "timeouts",
        "createMarkers",
        "contentIDReferences",
        "splitTransactions",
        "streamIfMatch",
        "deepInsert",
        "conflictPolicies",
    ]

    /// Reads the sync role's members of a configuration (`StorageSettings.roles`); the others
    /// are other roles'. Every error names the member at fault.
    package init(roles: [String: JSON]) throws(EntityError) {
        self.init()
        for name in roles.keys.sorted() where Self.members.contains(name) {
            let value = roles[name]!
            switch (name, value) {
            case ("serviceRoot", .string(let s)): serviceRoot = s
            case ("serviceRoot", .null): serviceRoot = nil
            case ("definingRequests", .array(let items)):
                for item in items {
                    guard case .string(let n)? = item["name"], case .string(let u)? = item["url"] else {
                        throw .badInput("configuration: each defining request needs \"name\" and \"url\" strings")
                    }
                    var streams = false
                    if case .object(let members) = item {
                        for (key, value) in members where key != "name" && key != "url" {
                            guard key == "retrieveStreams", case .bool(let b) = value else {
                                throw .badInput(
                                    "configuration: defining request '\(n)': unknown member '\(key)' (a defining request has \"name\", \"url\" and \"retrieveStreams\": true or false)"
                                )
                            }
                            streams = b
                        }
                    }
                    definingRequests.append(DefiningRequest(name: n, url: u, retrieveStreams: streams))
                }
            case ("authentication", .null): authentication = nil
            case ("authentication", _): authentication = try Authentication(json: value)
            case ("queryParameters", .object(let members)):
                var out: [String: String] = [:]
                for (k, v) in members {
                    guard case .string(let text) = v else {
                        throw .badInput("configuration: queryParameters.\(k) must be a string")
                    }
                    guard !k.isEmpty, !k.hasPrefix("$"), !k.hasPrefix("!"),
                        k.unicodeScalars.allSatisfy({
                            $0.value > 0x20 && $0.value < 0x7F && !"&=#?%".unicodeScalars.contains($0)
                        }),
                        text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F })
                    else {
                        throw .badInput(
                            "configuration: queryParameters: '\(k)' is not a parameter name to add to every request (no $ or ! options, no spaces, &, =, #, ?, %; values without control characters)"
                        )
                    }
                    out[k] = text
                }
                queryParameters = out
            case ("queryParameters", _):
                throw .badInput("configuration: queryParameters must be an object of names and string values")
            case ("supportsBatch", .bool(let b)): supportsBatch = b
            case ("refreshGroupRows", _):
                guard case .number(let text) = value, let n = Int(text), Self.refreshGroupRowsRange.contains(n) else {
                    throw .badInput(
                        "configuration: refreshGroupRows must be a whole number of rows from \(Self.refreshGroupRowsRange.lowerBound) to \(Self.refreshGroupRowsRange.upperBound)"
                    )
                }
                refreshGroupRows = n
            case ("timeouts", _): timeouts = try Timeouts(json: value)
            case ("createMarkers", .object(let members)):
                var out: [String: String] = [:]
                for (set, v) in members {
                    guard case .string(let property) = v, !property.isEmpty else {
                        throw .badInput("configuration: createMarkers.\(set) must name a property (a string)")
                    }
                    out[set] = property
                }
                createMarkers = out
            case ("createMarkers", _):
                throw .badInput("configuration: createMarkers must be an object of entity sets and property names")
            case ("contentIDReferences", .bool(let b)): contentIDReferences = b
            case ("contentIDReferences", .null): contentIDReferences = nil
            case ("splitTransactions", .bool(let b)): splitTransactions = b
            case ("streamIfMatch", .string(let s)):
                guard let v = StreamIfMatch(rawValue: s) else {
                    throw .badInput("configuration: streamIfMatch is \"media\" or \"entity\", not '\(s)'")
                }
                streamIfMatch = v
            case ("deepInsert", .bool(let b)): deepInsert = b
            case ("conflictPolicies", .object(let members)):
                var out: [String: ConflictPolicy] = [:]
                for (set, v) in members {
                    guard case .string(let text) = v, let policy = ConflictPolicy(rawValue: text) else {
                        throw .badInput(
                            "configuration: conflictPolicies.\(set) must be one of \(ConflictPolicy.allCases.map(\.rawValue).joined(separator: ", "))"
                        )
                    }
                    out[set] = policy
                }
                conflictPolicies = out
            case ("conflictPolicies", _):
                throw .badInput("configuration: conflictPolicies must be an object of entity sets and policies")
            default:
                throw .badInput("configuration: unknown or mistyped member '\(name)'")
            }
        }
    }

    /// The sync role's members of the configuration JSON (those not at their defaults, but for
    /// `definingRequests`).
    package var roles: [String: JSON] {
        var members: [(String, JSON)] = []
        if let serviceRoot { members.append(("serviceRoot", .string(serviceRoot))) }
        members.append(
            (
                "definingRequests",
                .array(
                    definingRequests.map {
                        .object(
                            [("name", .string($0.name)), ("url", .string($0.url))]
                                + ($0.retrieveStreams ? [("retrieveStreams", .bool(true))] : []))
                    })
            ))
        if let authentication { members.append(("authentication", authentication.json)) }
        if !supportsBatch { members.append(("supportsBatch", .bool(false))) }
        if refreshGroupRows != Self.defaultRefreshGroupRows {
            members.append(("refreshGroupRows", .number(String(refreshGroupRows))))
        }
        if !queryParameters.isEmpty {
            members.append(
                ("queryParameters", .object(queryParameters.keys.sorted().map { ($0, .string(queryParameters[$0]!)) })))
        }
        if timeouts != Timeouts() { members.append(("timeouts", timeouts.json)) }
        if let contentIDReferences { members.append(("contentIDReferences", .bool(contentIDReferences))) }
        if splitTransactions { members.append(("splitTransactions", .bool(true))) }
        if streamIfMatch != .media { members.append(("streamIfMatch", .string(streamIfMatch.rawValue))) }
        if deepInsert { members.append(("deepInsert", .bool(true))) }
        if !createMarkers.isEmpty {
            members.append(
                ("createMarkers", .object(createMarkers.keys.sorted().map { ($0, .string(createMarkers[$0]!)) })))
        }
        if !conflictPolicies.isEmpty {
            members.append(
                (
                    "conflictPolicies",
                    .object(conflictPolicies.keys.sorted().map { ($0, .string(conflictPolicies[$0]!.rawValue)) })
                ))
        }
        return Dictionary(members, uniquingKeysWith: { a, _ in a })
    }
}

extension SyncSettings {
    /// How `flush` and `refresh` authenticate to the service: the configuration's
    /// `"authentication"` member. It says where the secret is read (an environment variable or a
    /// file, at flush or refresh time), never the secret itself.
    ///
    /// ```json
    /// "authentication": {"type": "basic", "user": "SAPUSER", "passwordEnv": "SAP_PASSWORD"}
    /// "authentication": {"type": "oauth2ClientCredentials", "tokenURL": "https://auth.example.com/oauth/token",
    ///                    "clientID": "sb-offline", "secretFile": "/run/secrets/sap-client-secret", "scope": "API"}
    /// ```
    public enum Authentication: Sendable, Hashable {
        /// HTTP Basic (RFC 7617) with `user` and the password read from `password`, sent to the
        /// service root's origin only.
        case basic(user: String, password: SecretSource)
        /// OAuth 2.0 client credentials (RFC 6749 §4.4): a bearer token fetched from `tokenURL`
        /// with `clientID` and the secret read from `secret` as HTTP Basic, refreshed before it
        /// expires and once after a 401. The client secret goes to `tokenURL` only, the token to
        /// the service root's origin only.
        case oauth2ClientCredentials(tokenURL: String, clientID: String, secret: SecretSource, scope: String?)
    }

    /// Where a secret is read when a flush or refresh needs it.
    public enum SecretSource: Sendable, Hashable, CustomStringConvertible {
        /// The value of an environment variable (`"passwordEnv"`, `"secretEnv"`).
        case environment(String)
        /// The contents of a file, one trailing newline trimmed (`"passwordFile"`, `"secretFile"`).
        case file(String)

        /// Names the variable or the file, never the secret: `environment variable SAP_PASSWORD`.
        public var description: String {
            switch self {
            case .environment(let name): "environment variable \(name)"
            case .file(let path): "file \(path)"
            }
        }
    }
}

extension SyncSettings.Authentication {
    /// Reads the `"authentication"` member; every error names the member at fault.
    init(json: JSON) throws(EntityError) {
        guard case .object(let members) = json else {
            throw .badInput("configuration: authentication must be an object with a \"type\"")
        }
        var strings: [String: String] = [:]
        for (name, value) in members {
            guard case .string(let s) = value else {
                throw .badInput("configuration: authentication member '\(name)' must be a string")
            }
            guard strings.updateValue(s, forKey: name) == nil else {
                throw .badInput("configuration: authentication member '\(name)' is given twice")
            }
        }
        func take(_ allowed: Set<String>) throws(EntityError) {
            for name in strings.keys.sorted() where !allowed.contains(name) {
                throw .badInput("configuration: unknown authentication member '\(name)'")
            }
        }
        func required(_ name: String) throws(EntityError) -> String {
            guard let v = strings[name], !v.isEmpty else {
                throw .badInput("configuration: authentication of type '\(strings["type"] ?? "")' needs \"\(name)\"")
            }
            return v
        }
        func secret(_ base: String) throws(EntityError) -> SyncSettings.SecretSource {
            switch (strings[base + "Env"], strings[base + "File"]) {
            case (let name?, nil):
                guard Self.isVariableName(name) else {
                    throw .badInput(
                        "configuration: authentication \(base)Env '\(name)' is not an environment variable name (letters, digits, _)"
                    )
                }
                return .environment(name)
            case (nil, let path?):
                guard !path.isEmpty, !path.utf8.contains(0) else {
                    throw .badInput("configuration: authentication \(base)File must be a file's path")
                }
                return .file(path)
            case (nil, nil):
                throw .badInput(
                    "configuration: authentication needs \"\(base)Env\" (an environment variable's name) or \"\(base)File\" (a file's path); the secret itself never goes in the configuration"
                )
            case (_?, _?):
                throw .badInput("configuration: authentication takes \"\(base)Env\" or \"\(base)File\", not both")
            }
        }
        switch strings["type"] {
        case "basic":
            try take(["type", "user", "passwordEnv", "passwordFile"])
            let user = try required("user")
            guard !user.contains(":"), user.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }) else {
                throw .badInput("configuration: authentication user must not contain ':' or control characters")
            }
            self = .basic(user: user, password: try secret("password"))
        case "oauth2ClientCredentials":
            try take(["type", "tokenURL", "clientID", "secretEnv", "secretFile", "scope"])
            let url = try required("tokenURL")
            let lower = url.lowercased()
            guard lower.hasPrefix("https://") || lower.hasPrefix("http://"), !url.contains("#"),
                url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
            else {
                throw .badInput("configuration: authentication tokenURL '\(url)' is not an http:// or https:// URL")
            }
            let scope = strings["scope"]
            if let scope, scope.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
                throw .badInput("configuration: authentication scope must not contain control characters")
            }
            self = .oauth2ClientCredentials(
                tokenURL: url, clientID: try required("clientID"), secret: try secret("secret"), scope: scope)
        case let other?:
            throw .badInput(
                "configuration: authentication type '\(other)' is not \"basic\" or \"oauth2ClientCredentials\"")
        case nil:
            throw .badInput(
                "configuration: authentication needs a \"type\": \"basic\" or \"oauth2ClientCredentials\"")
        }
    }

    static func isVariableName(_ s: String) -> Bool {
        guard let first = s.utf8.first, first == UInt8(ascii: "_") || (first | 0x20) >= 0x61 && (first | 0x20) <= 0x7A
        else { return false }
        return s.utf8.allSatisfy {
            $0 == UInt8(ascii: "_") || ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A || $0 >= 0x30 && $0 <= 0x39
        }
    }

    var json: JSON {
        func secret(_ base: String, _ s: SyncSettings.SecretSource) -> (String, JSON) {
            switch s {
            case .environment(let name): (base + "Env", .string(name))
            case .file(let path): (base + "File", .string(path))
            }
        }
        switch self {
        case .basic(let user, let password):
            return .object([("type", .string("basic")), ("user", .string(user)), secret("password", password)])
        case .oauth2ClientCredentials(let url, let id, let s, let scope):
            var members: [(String, JSON)] = [
                ("type", .string("oauth2ClientCredentials")), ("tokenURL", .string(url)), ("clientID", .string(id)),
                secret("secret", s),
            ]
            if let scope { members.append(("scope", .string(scope))) }
            return .object(members)
        }
    }
}

extension SyncSettings {
    /// Refuses a `createMarkers` entry that names a set `schema` lacks, or a property that cannot
    /// carry a request's identity: absent, a key, computed, not a string or a GUID, or a string
    /// shorter than 32 characters.
    package func checkCreateMarkers(_ schema: Schema) throws(EntityError) {
        for set in conflictPolicies.keys.sorted() where schema.entityType(ofSet: set) == nil || schema.isSystemSet(set)
        {
            throw .badInput("configuration: conflictPolicies names '\(set)', which is not an entity set of the service")
        }
        for (setName, name) in createMarkers.sorted(by: { $0.key < $1.key }) {
            guard let type = schema.entityType(ofSet: setName), !schema.isSystemSet(setName) else {
                throw .badInput(
                    "configuration: createMarkers names '\(setName)', which is not an entity set of the service")
            }
            guard let p = type.property(name) else {
                throw .badInput(
                    "configuration: createMarkers.\(setName): \(type.qualifiedName) has no property '\(name)'")
            }
            let why: String? =
                if type.key.contains(name) {
                    "it is a key property"
                } else if p.computed {
                    "the service computes it"
                } else if p.type == .primitive(.guid) {
                    nil
                } else if p.type != .primitive(.string) {
                    "it is not an Edm.String or an Edm.Guid"
                } else if let n = p.maxLength, n < 32 {
                    "its MaxLength \(n) cannot hold 32 characters"
                } else {
                    nil
                }
            if let why {
                throw .badInput(
                    "configuration: createMarkers.\(setName): property '\(name)' cannot carry a request's identity: \(why)"
                )
            }
        }
    }

    /// The entity sets whose key the service assigns (a computed key property) and that have no
    /// `createMarkers` entry: a create of one sent again after its answer was lost may be applied
    /// twice by a service that does not deduplicate repeated requests.
    package func setsWithoutMarker(_ schema: Schema) -> [String] {
        schema.serviceSetNames.filter { name in
            guard createMarkers[name] == nil, let type = schema.entityType(ofSet: name) else { return false }
            return type.key.contains { type.property($0)?.computed == true }
        }
    }
}

extension SyncSettings {
    /// Checks the URLs the configuration sends requests to (`serviceRoot`, and `authentication`'s
    /// `tokenURL`) as `ServiceURL.check` does: where a configuration comes in (its JSON, `create`).
    package func checkURLs() throws(EntityError) {
        if let serviceRoot { try ServiceURL.check(serviceRoot, option: "configuration: serviceRoot") }
        if case .oauth2ClientCredentials(let tokenURL, _, _, _)? = authentication {
            try ServiceURL.check(tokenURL, option: "configuration: authentication tokenURL")
        }
    }
}

extension SyncSettings {
    /// Whether a configuration's members (`StorageSettings.roles`) name a service root or a
    /// defining request — the store is an offline copy — read without parsing the rest: a served
    /// request asks it.
    package static func namesAService(_ roles: [String: JSON]) -> Bool {
        if case .string? = roles["serviceRoot"] { return true }
        if case .array(let requests)? = roles["definingRequests"] { return !requests.isEmpty }
        return false
    }
}

extension EntityStore {
    /// The sync role's settings, read from the configuration the store keeps (checked when it
    /// was made or changed): once per flush or refresh, which hold them while they run.
    package func syncSettings() throws(EntityError) -> SyncSettings { try SyncSettings(roles: configuration.roles) }
}

extension SyncRole {
    /// The sync role's part of a migration of the configuration: create markers and conflict
    /// policies of a set (or a marker property) the new `$metadata` drops are removed, each a
    /// warning, and the markers left are checked against the new schema.
    package static func migrateSettings(
        _ roles: inout [String: JSON], _ migration: SchemaMigration, warn: (String) -> Void
    ) throws {
        var settings = try SyncSettings(roles: roles)
        let gone = Set(migration.droppedSets)
        for (set, name) in settings.createMarkers.sorted(by: { $0.key < $1.key })
        where gone.contains(set) || migration.sets[set]?.dropped.contains(name) == true {
            warn(
                "createMarkers.\(set) (\(name)) is removed: the new $metadata drops \(gone.contains(set) ? "the set" : "the property")"
            )
            settings.createMarkers[set] = nil
        }
        for set in settings.conflictPolicies.keys.sorted() where gone.contains(set) {
            warn("conflictPolicies.\(set) is removed: the new $metadata drops the set")
            settings.conflictPolicies[set] = nil
        }
        try settings.checkCreateMarkers(migration.new)
        for name in SyncSettings.members { roles[name] = nil }
        roles.merge(settings.roles) { a, _ in a }
    }
}

extension EntityStore {
    /// Changes the defining requests: `change` edits the list, which is written to `meta` (with
    /// whatever `also` writes, in the same transaction) and then takes effect. Nothing changes
    /// when `change` or the write throws.
    package func changeDefiningRequests(
        _ change: (inout [SyncSettings.DefiningRequest]) throws -> Void,
        also: (@Sendable (WriteView) throws -> Void)? = nil
    ) throws {
        try changeRoleSettings(
            { roles in
                var settings = try SyncSettings(roles: roles)
                try change(&settings.definingRequests)
                roles["definingRequests"] = settings.roles["definingRequests"]
            }, also: also)
    }
}
