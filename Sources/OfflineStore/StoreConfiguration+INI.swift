import Storage
import Sync

/// SAP's offline application configuration file (`.ini`), read into a ``StoreConfiguration``.
///
/// SAP documents the file under "Defining an Application Configuration File" / "Application
/// Configuration File": SAP BTP SDK for iOS and Android
/// (help.sap.com/doc/f53c64b93e5140918d676b927a3cd65b/Cloud/en-US/docs-en/guides/features/offline/common/defining-an-application-configuration-file/application-configuration-file.html)
/// and SAP Mobile Platform 3.0 SDK
/// (help.sap.com/doc/saphelp_smp3012sdk/3.0.12/en-US/f5/a25877c16f4fc384c44fcf0b92dab8/content.htm).
/// What those pages say, in short: the file holds one or more `[endpoint]` sections, each
/// optionally followed by its defining requests (`[defining_request]` in SMP 3, `[defining_query]`
/// in the BTP SDK); every setting has a default, so the file is needed only for non-default
/// behaviour. An endpoint has a required `name` (the connection name in the cockpit) and optional
/// settings: `prepopulate_offline_db`, `prepopulate_offline_db_interval`, `indexed_type`
/// (repeatable, `<namespace>.<entity type>: Property [ASC|DESC][, Property [ASC|DESC], …]`),
/// `request_format`/`defining_query_format`, `delta_request_format`/`delta_query_format`,
/// `offline_db_collation`, `case_sensitive_offline_db`, `json_datetimeoffset_in_utc`,
/// `local_change_expiry`, `allow_omitting_max_length_facet`, `content_id_header_location`,
/// `max_delta_resends`, `allow_defining_query_removal`, `early_populate_backend_generated_values`.
/// A defining request has a `name` — in SMP 3 the request itself as the application issues it; in
/// the BTP SDK a name whose URL the application's code gives — and settings such as
/// `is_shared_data`.
///
/// This store talks to the service itself (there is no Mobile Services middle tier), so the reader
/// maps what has a meaning here and turns every other key into an ``INIWarning`` naming the key,
/// its section and its line — never silence. The DocC article "Configuration" lists both.
extension StoreConfiguration {
    /// A key of an application configuration file that the store handles differently or not at
    /// all, with where it is and what the store does instead.
    public struct INIWarning: Sendable, Hashable, CustomStringConvertible {
        /// 1-based line of the key (of the section header for a section-wide warning).
        public var line: Int
        /// `[endpoint] GWSAMPLE`, `[defining_request] SG_Sales`: the section's kind and name.
        public var section: String
        public var key: String
        public var value: String
        public var message: String

        public var description: String { "line \(line), \(section): \(key)=\(value): \(message)" }
    }

    /// A syntax error in an application configuration file, or a value the store cannot take.
    public struct INIError: Error, Sendable, Hashable, CustomStringConvertible {
        /// 1-based line; 0 when the error concerns the whole file.
        public var line: Int
        public var message: String

        public init(line: Int, message: String) {
            self.line = line
            self.message = message
        }

        public var description: String { line > 0 ? "line \(line): \(message)" : message }
    }

    /// Whether a configuration file is SAP's `.ini` form rather than this store's JSON: by the
    /// extension of `path` (`.ini`; `.json` is JSON), else by the content (JSON starts with `{`).
    public static func isINI(path: String, bytes: [UInt8]) -> Bool {
        let lower = path.lowercased()
        if lower.hasSuffix(".ini") { return true }
        if lower.hasSuffix(".json") { return false }
        var body = bytes[...]
        if body.starts(with: [0xEF, 0xBB, 0xBF]) { body = body.dropFirst(3) }
        let first = body.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
        return first != UInt8(ascii: "{")
    }

    /// Reads SAP's application configuration file `bytes` for a store made from `metadata` (the
    /// `$metadata` document that `indexed_type`'s entity types and the defining requests are
    /// checked against). The file may hold several endpoints; a store keeps one service, so it
    /// takes `endpoint` (by `name`), or the first one and warns about the others.
    ///
    /// ```swift
    /// let (configuration, warnings) = try StoreConfiguration.readINI(Array(ini.utf8), metadata: metadata)
    /// for w in warnings { print("warning: \(w)") }
    /// ```
    /// - Throws: ``INIError`` with the line of a syntax error, a value out of its documented set,
    ///   an unknown entity type, a bad index or a defining request the schema cannot read;
    ///   `CSDLError` for bad metadata.
    public static func readINI(
        _ bytes: [UInt8], metadata: [UInt8], endpoint: String? = nil
    ) throws -> (
        configuration: StoreConfiguration, warnings: [INIWarning]
    ) {
        let file = try INIFile(bytes)
        let schema = try CSDL.parse(metadata).withSystemSets()
        var reader = INIReader(schema: schema)
        try reader.read(file, endpoint: endpoint)
        // In file order (a stable sort: one line's warnings keep their order).
        let warnings = reader.warnings.enumerated().sorted {
            ($0.element.line, $0.offset) < ($1.element.line, $1.offset)
        }
        return (reader.configuration, warnings.map(\.element))
    }
}

/// Maps the sections of an `INIFile` onto a `StoreConfiguration`, collecting warnings.
private struct INIReader {
    typealias INIError = StoreConfiguration.INIError
    let schema: Schema
    var configuration = StoreConfiguration()
    var warnings: [StoreConfiguration.INIWarning] = []

    init(schema: Schema) { self.schema = schema }

    static let definingSections: Set<String> = ["defining_request", "defining_query"]
    static let urlKeys = ["defining_query", "defining_request", "query", "request", "url"]

    mutating func read(_ file: INIFile, endpoint wanted: String?) throws(INIError) {
        // Group each endpoint with the defining requests that follow it.
        var groups: [(endpoint: INIFile.Section, requests: [INIFile.Section])] = []
        for s in file.sections {
            if s.kind == "endpoint" {
                groups.append((s, []))
            } else if Self.definingSections.contains(s.kind) {
                guard !groups.isEmpty else {
                    throw INIError(
                        line: s.line,
                        message: "[\(s.kind)] comes before any [endpoint]: each endpoint's defining requests follow it")
                }
                groups[groups.count - 1].requests.append(s)
            } else {
                warnings.append(
                    .init(
                        line: s.line, section: "[\(s.kind)]", key: "[\(s.kind)]", value: "",
                        message: "an unknown section: its \(s.entries.count) keys are not read"))
            }
        }
        guard !groups.isEmpty else { throw INIError(line: 0, message: "the file has no [endpoint] section") }
        var names: [String] = []
        for g in groups {
            let n = try single("name", in: g.endpoint, required: true)!
            if names.contains(n.value) {
                throw INIError(line: n.line, message: "a second [endpoint] named '\(n.value)'")
            }
            names.append(n.value)
        }
        let chosen: Int
        if let wanted {
            guard let i = names.firstIndex(of: wanted) else {
                throw INIError(
                    line: 0,
                    message:
                        "no [endpoint] named '\(wanted)'; the file has \(names.map { "'\($0)'" }.joined(separator: ", "))"
                )
            }
            chosen = i
        } else {
            chosen = 0
        }
        for (i, g) in groups.enumerated() where i != chosen {
            warnings.append(
                .init(
                    line: g.endpoint.line, section: "[endpoint] \(names[i])", key: "name", value: names[i],
                    message:
                        "not used, nor its \(g.requests.count) defining requests: a store keeps one service (make another with init --endpoint \(names[i]))"
                ))
        }
        try readEndpoint(groups[chosen].endpoint, name: names[chosen])
        for r in groups[chosen].requests { try readDefiningRequest(r) }
    }

    // MARK: [endpoint]

    mutating func readEndpoint(_ s: INIFile.Section, name: String) throws(INIError) {
        let section = "[endpoint] \(name)"
        try checkSingles(s, except: ["indexed_type"])
        for e in s.entries {
            func warn(_ message: String) {
                warnings.append(.init(line: e.line, section: section, key: e.key, value: e.value, message: message))
            }
            switch e.key {
            case "name":
                if Self.isAbsoluteURL(e.value) {
                    try Self.checkServiceRoot(e)
                    configuration.serviceRoot = e.value.hasSuffix("/") ? e.value : e.value + "/"
                } else if s.all("service_root").isEmpty {
                    warn(
                        "a connection name in SAP Mobile Services; this store talks to the service itself: give its root URL as name=URL or service_root=URL, or refresh/flush --service URL"
                    )
                }
            case "service_root":
                guard Self.isAbsoluteURL(e.value) else {
                    throw INIError(line: e.line, message: "service_root must be an http or https URL, not '\(e.value)'")
                }
                try Self.checkServiceRoot(e)
                configuration.serviceRoot = e.value.hasSuffix("/") ? e.value : e.value + "/"
            case "indexed_type":
                try readIndex(e, section: section)
            case "prepopulate_offline_db":
                _ = try choice(e, ["Y", "N", "SHARED-ONLY"])
                warn(
                    "no database is made on a server: the store starts empty (its schema only) and its first refresh downloads the defining requests"
                )
            case "prepopulate_offline_db_interval":
                _ = try number(e)
                warn("no shared data is prepared on a server: each refresh reads the service")
            case "request_format", "defining_query_format", "delta_request_format", "delta_query_format":
                warn(
                    "the store asks for JSON only (V2 verbose JSON or V4 JSON; Accept: application/json) and does not read Atom"
                )
            case "offline_db_collation":
                if e.value.uppercased() != "UTF8BIN" {
                    warn("strings compare and sort by code point (as UTF8BIN); no other collation is offered")
                }
            case "case_sensitive_offline_db":
                if !(try flag(e)) {
                    warn("string comparisons are case-sensitive; use tolower() in $filter to compare without case")
                }
            case "json_datetimeoffset_in_utc":
                if try flag(e) {
                    warn("Edm.DateTimeOffset values keep the offset the service sent; they are not turned into UTC")
                }
            case "local_change_expiry":
                _ = try number(e)
                warn(
                    "local changes never expire: a request stays in the RequestQueue until flush sends it, undo drops it, or its error is resolved"
                )
            case "allow_omitting_max_length_facet":
                if !(try flag(e)) {
                    warn(
                        "a string property without MaxLength is taken as unbounded; the store does not refuse such a $metadata"
                    )
                }
            case "content_id_header_location":
                if try choice(e, ["mime", "operation"]) == "operation" {
                    warn("flush puts Content-ID in each $batch part's MIME headers (as 'mime'), not in the operation's")
                }
            case "max_delta_resends":
                _ = try number(e)
                warn(
                    "there are no delta resends: a refresh reads a delta link once, and a failed page fails that refresh"
                )
            case "allow_defining_query_removal":
                if !(try flag(e)) {
                    warn("undefine always removes a defining request (and the entities only it held)")
                }
            case "early_populate_backend_generated_values":
                _ = try flag(e)
                warn(
                    "values the service generates (keys, timestamps) arrive with the next refresh after flush, not earlier"
                )
            case "delta_enabled":
                if !(try flag(e)) {
                    warn(
                        "refresh asks for delta wherever the service offers it and reads in full where it does not; delta cannot be switched off"
                    )
                }
            case "batch_all_defining_queries":
                _ = try flag(e)
                warn(
                    "refresh reads the defining requests one after another, each with its own requests, not in one $batch"
                )
            case "page_size":
                _ = try number(e)
                warn(
                    "the page size is asked per refresh, not kept in the configuration: refresh --page-size \(e.value)")
            default:
                warn("not a key this store knows: not read")
            }
        }
    }

    /// `indexed_type=<namespace>.<entity type>: Property [ASC|DESC][, …]` → an index in the
    /// store's `indexed_type` form on every entity set of that type.
    mutating func readIndex(_ e: INIFile.Entry, section: String) throws(INIError) {
        guard let colon = e.value.firstIndex(of: ":") else {
            throw INIError(
                line: e.line,
                message:
                    "indexed_type must be '<namespace>.<entity type>: Property [ASC|DESC][, …]', not '\(e.value)'")
        }
        let typeName = INIFile.trimmed(String(e.value[..<colon]))
        let definition = INIFile.trimmed(String(e.value[e.value.index(after: colon)...]))
        guard let type = entityType(typeName) else {
            throw INIError(line: e.line, message: "indexed_type: the $metadata has no entity type '\(typeName)'")
        }
        let sets = schema.entitySetNames.filter {
            schema.entitySets[$0]?.entityType == type && schema.entitySets[$0]?.isSingleton == false
        }
        guard !sets.isEmpty else {
            warnings.append(
                .init(
                    line: e.line, section: section, key: e.key, value: e.value,
                    message: "no entity set has the type '\(type)': no index is made"))
            return
        }
        for set in sets {
            let index: IndexDefinition
            do { index = try IndexDefinition(entitySet: set, definition: definition) } catch {
                throw INIError(line: e.line, message: "indexed_type: \(error)")
            }
            for c in index.components where !hasProperty(path: c.path, type: type) {
                throw INIError(
                    line: e.line,
                    message:
                        "indexed_type: the entity type '\(type)' has no property '\(c.path.joined(separator: "/"))'")
            }
            let existing = configuration.indexes[set, default: []].compactMap {
                try? IndexDefinition(entitySet: set, definition: $0).name
            }
            if existing.contains(index.name) {
                warnings.append(
                    .init(
                        line: e.line, section: section, key: e.key, value: e.value,
                        message: "the index '\(index.name)' on \(set) is given twice: it is made once"))
                continue
            }
            configuration.indexes[set, default: []].append(index.text)
        }
    }

    /// An entity type by qualified name (`GWSAMPLE_BASIC.Product`), by its name alone when one
    /// type has it, or by the name of an entity set.
    func entityType(_ name: String) -> String? {
        if schema.entityTypes[name] != nil { return name }
        let short = schema.entityTypes.values.filter { $0.name == name }
        if short.count == 1 { return short[0].qualifiedName }
        if let set = schema.entitySets[name], !set.isSingleton { return set.entityType }
        return nil
    }

    func hasProperty(path: [String], type: String) -> Bool {
        guard let first = path.first, let t = schema.entityTypes[type] else { return false }
        guard var p = t.properties.first(where: { $0.name == first }) else { return false }
        for step in path.dropFirst() {
            guard case .complex(let name) = p.type, let c = schema.complexTypes[name],
                let q = c.properties.first(where: { $0.name == step })
            else { return false }
            p = q
        }
        return true
    }

    // MARK: [defining_request] / [defining_query]

    mutating func readDefiningRequest(_ s: INIFile.Section) throws(INIError) {
        try checkSingles(s, except: [])
        let nameEntry = try single("name", in: s, required: true)!
        let urlEntries = s.entries.filter { Self.urlKeys.contains($0.key) }
        if urlEntries.count > 1 {
            throw INIError(
                line: urlEntries[1].line,
                message:
                    "a defining request takes one URL: '\(urlEntries[0].key)' at line \(urlEntries[0].line) and '\(urlEntries[1].key)'"
            )
        }
        var name = nameEntry.value
        var url: String
        var urlLine: Int
        let section: String
        if let u = urlEntries.first {
            url = u.value
            urlLine = u.line
            section = "[\(s.kind)] \(name)"
            do { try Membership.validate(name: name) } catch {
                throw INIError(line: nameEntry.line, message: "\(error)")
            }
        } else {
            // SMP 3: the name is the request as the application issues it.
            url = name
            urlLine = nameEntry.line
            name = Self.storeName(for: name)
            section = "[\(s.kind)] \(nameEntry.value)"
            if name != nameEntry.value {
                warnings.append(
                    .init(
                        line: nameEntry.line, section: section, key: "name", value: nameEntry.value,
                        message:
                            "taken as the request's URL (SMP 3's form); the defining request is named '\(name)' (letters, digits, '_', '-', '.')"
                    ))
            }
        }
        while url.hasPrefix("/") { url.removeFirst() }
        guard !url.isEmpty else { throw INIError(line: urlLine, message: "the defining request's URL is empty") }
        do { _ = try DefiningRequests.bind(url, schema: schema) } catch {
            let hint =
                urlEntries.isEmpty
                ? " (give the URL as defining_query=…: SAP's SDK takes it from the application's code)" : ""
            throw INIError(line: urlLine, message: "defining request '\(name)': \(error)\(hint)")
        }
        if let first = configuration.definingRequests.first(where: { $0.name == name }) {
            throw INIError(
                line: nameEntry.line, message: "a second defining request named '\(first.name)'")
        }
        configuration.definingRequests.append(.init(name: name, url: url))
        for e in s.entries where e.key == "automatically_retrieves_streams" {
            configuration.definingRequests[configuration.definingRequests.count - 1].retrieveStreams = try flag(e)
        }
        for e in s.entries
        where e.key != "name" && !Self.urlKeys.contains(e.key) && e.key != "automatically_retrieves_streams" {
            func warn(_ message: String) {
                warnings.append(.init(line: e.line, section: section, key: e.key, value: e.value, message: message))
            }
            switch e.key {
            case "is_shared_data":
                if try flag(e) {
                    warn("there is no shared cache on a server: every store reads the data from the service itself")
                }
            case "refresh_interval":
                _ = try number(e)
                warn("nothing refreshes on a schedule: the data is as fresh as the last refresh")
            case "download_cache_only":
                if try flag(e) {
                    warn("there is no download cache: every refresh reads the service")
                }
            case "automatic_delta", "delta_enabled":
                if !(try flag(e)) {
                    warn(
                        "refresh asks for delta wherever the service offers it and reads in full where it does not; delta cannot be switched off"
                    )
                }
            case "track_deltas":
                if try choice(e, ["AUTO", "ALWAYS", "NEVER"]) != "AUTO" {
                    warn(
                        "refresh asks for the service's delta where it has one and reads in full where it does not (as AUTO); deltas are not computed on a server"
                    )
                }
            case "delta_token_lifetime":
                _ = try number(e)
                warn(
                    "the service's delta link is kept until the service refuses it; then the next refresh reads in full"
                )
            default:
                warn("not a key this store knows: not read")
            }
        }
    }

    /// A defining request's name in the store from a URL: letters, digits, `_`, `-`, `.`; at
    /// most 128.
    static func storeName(for url: String) -> String {
        var out = ""
        for ch in url.drop(while: { $0 == "/" }) {
            if ch.isASCII && (ch.isLetter || ch.isNumber || ch == "-" || ch == "." || ch == "_") {
                out.append(ch)
            } else if !out.isEmpty && out.last != "_" {
                out.append("_")
            }
        }
        while out.last == "_" { out.removeLast() }
        return String(out.prefix(128))
    }

    // MARK: values

    /// Refuses a key given twice in one section (other than `repeatable` ones).
    func checkSingles(_ s: INIFile.Section, except repeatable: Set<String>) throws(INIError) {
        var seen: [String: Int] = [:]
        for e in s.entries where !repeatable.contains(e.key) {
            if let first = seen[e.key] {
                throw INIError(
                    line: e.line,
                    message: "'\(e.key)' is given twice in this [\(s.kind)] section (first at line \(first))")
            }
            seen[e.key] = e.line
        }
    }

    func single(_ key: String, in s: INIFile.Section, required: Bool) throws(INIError) -> INIFile.Entry? {
        let all = s.all(key)
        if all.count > 1 {
            throw INIError(
                line: all[1].line,
                message: "'\(key)' is given twice in this [\(s.kind)] section (first at line \(all[0].line))")
        }
        if required, all.isEmpty || all[0].value.isEmpty {
            throw INIError(line: all.first?.line ?? s.line, message: "[\(s.kind)] needs name=…")
        }
        return all.first
    }

    /// `Y`/`N` (also `yes`/`no`, `true`/`false`, `1`/`0`).
    func flag(_ e: INIFile.Entry) throws(INIError) -> Bool {
        switch e.value.lowercased() {
        case "y", "yes", "true", "1": return true
        case "n", "no", "false", "0": return false
        default: throw INIError(line: e.line, message: "\(e.key) must be Y or N, not '\(e.value)'")
        }
    }

    /// One of `options` (without regard to case), as written in `options`.
    func choice(_ e: INIFile.Entry, _ options: [String]) throws(INIError) -> String {
        guard let match = options.first(where: { $0.lowercased() == e.value.lowercased() }) else {
            throw INIError(
                line: e.line, message: "\(e.key) must be \(options.joined(separator: ", ")), not '\(e.value)'")
        }
        return match
    }

    /// A whole number, 0 or more.
    func number(_ e: INIFile.Entry) throws(INIError) -> Int {
        guard let n = Int(e.value), n >= 0 else {
            throw INIError(line: e.line, message: "\(e.key) must be a whole number, not '\(e.value)'")
        }
        return n
    }

    /// `e`'s value checked as a service root (`ServiceURL.check`: a port past 65535, a
    /// `user:password@` are refused), the error on its line.
    static func checkServiceRoot(_ e: INIFile.Entry) throws(INIError) {
        do { try ServiceURL.check(e.value, option: e.key) } catch {
            throw INIError(line: e.line, message: "\(error)")
        }
    }

    static func isAbsoluteURL(_ s: String) -> Bool {
        let l = s.lowercased()
        return (l.hasPrefix("http://") || l.hasPrefix("https://")) && !s.contains(" ")
    }
}
