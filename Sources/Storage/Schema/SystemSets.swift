import LMDB
/// The store's own entity sets, read and queried like the service's: the request queue, the
/// archive of requests the service refused, and the log of uploads and downloads. Their names
/// are SAP Offline OData's, so `RequestQueue?$filter=CustomTag eq 'x'` means what its users expect.
package enum SystemSets {
    package static let namespace = "OfflineStore"
    package static let requestQueue = "RequestQueue"
    package static let errorArchive = "ErrorArchive"
    package static let eventLog = "EventLog"
    package static let requestHistory = "RequestHistory"
    package static let names = [requestQueue, errorArchive, eventLog, requestHistory]

    /// The database holding each system set's rows.
    static let databases = [requestQueue: "q", errorArchive: "errors", eventLog: "events", requestHistory: "history"]

    static func string(_ name: String, nullable: Bool = true) -> Property {
        Property(name: name, type: .primitive(.string), nullable: nullable)
    }

    /// A pending local change: `RequestID` orders the queue.
    static let request = EntityType(
        name: "Request", qualifiedName: "\(namespace).Request", key: ["RequestID"],
        properties: [
            Property(name: "RequestID", type: .primitive(.int64), nullable: false),
            string("Method", nullable: false),  // POST, PATCH, PUT, DELETE
            string("EntitySet", nullable: false),
            string("EntityKey", nullable: false),  // the key as in a URL: 'HT-1000' or A=1,B='x'
            Property(name: "KeyBytes", type: .primitive(.binary), nullable: false),  // the key tuple, exact
            string("Body"),  // OData JSON: the entity (POST, PUT) or its changes (PATCH)
            string("CustomTag"),
            string("CustomHeaders"),  // a JSON object of header names to values
            string("TransactionID"),
            string("UploadCategory"),
            Property(name: "RepeatabilityID", type: .primitive(.guid), nullable: false),
            Property(name: "CreatedAt", type: .primitive(.dateTimeOffset), nullable: false),
            string("Status", nullable: false),  // pending, sent, error
            Property(name: "Attempts", type: .primitive(.int32), nullable: false),
            Property(name: "Dependencies", type: .collection(.primitive(.int64))),
            Property(name: "NonMergeable", type: .primitive(.boolean), nullable: false),
            Property(name: "LocalKey", type: .primitive(.boolean), nullable: false),
            // When flush first sent it (Repeatability-First-Sent); null until then. Added after the
            // other properties, so records written before it read it as null.
            Property(name: "FirstSentAt", type: .primitive(.dateTimeOffset)),
            // A create whose entity leaves the store once applied (SAP's RemoveAfterUpload); null: no.
            Property(name: "RemoveAfterUpload", type: .primitive(.boolean)),
            // A create of a deep insert (the entity and those created under it go as one POST,
            // `NewEntity`); null: no.
            Property(name: "DeepInsert", type: .primitive(.boolean)),
        ])

    /// A request the service refused, with SAP's ErrorArchive fields.
    static let error = EntityType(
        name: "Error", qualifiedName: "\(namespace).Error", key: ["RequestID"],
        properties: [
            Property(name: "RequestID", type: .primitive(.int64), nullable: false),
            string("CustomTag"),
            Property(name: "HTTPStatusCode", type: .primitive(.int32)),
            string("Code"),
            string("Message"),
            string("InnerError"),
            string("RequestMethod", nullable: false),
            string("RequestURL", nullable: false),
            string("RequestBody"),
            string("AffectedEntity"),
            Property(name: "CausedBy", type: .primitive(.int64)),  // for a dependent: the request that failed
            Property(name: "ArchivedAt", type: .primitive(.dateTimeOffset), nullable: false),
            // A conflict (the service refused the change for a stale ETag, 412): the three versions
            // as OData JSON — the service's image the change was made on, the entity as changed
            // here, and the service's entity when the refusal came (null: gone there) — its
            // ETag, and the properties where this store's and the service's differ. Added after
            // the others: entries written before read them as null.
            string("BaseEntity"),
            string("LocalEntity"),
            string("ServerEntity"),
            string("ServerETag"),
            string("Differences"),  // comma-separated property names
        ])

    /// One upload or download.
    static let event = EntityType(
        name: "Event", qualifiedName: "\(namespace).Event", key: ["EventID"],
        properties: [
            Property(name: "EventID", type: .primitive(.int64), nullable: false),
            string("Type", nullable: false),  // Upload, Download
            Property(name: "StartedAt", type: .primitive(.dateTimeOffset), nullable: false),
            Property(name: "FinishedAt", type: .primitive(.dateTimeOffset)),
            string("Outcome", nullable: false),  // succeeded, failed, cancelled
            Property(name: "Requests", type: .primitive(.int64)),
            Property(name: "Entities", type: .primitive(.int64)),
            string("Details"),
        ])

    /// What became of a request that left the queue (or was refused): the outcome record.
    static let outcome = EntityType(
        name: "Outcome", qualifiedName: "\(namespace).Outcome", key: ["RequestID"],
        properties: [
            Property(name: "RequestID", type: .primitive(.int64), nullable: false),
            // applied, found applied, in doubt, refused, given up, undone, cancelled, merged
            string("Outcome", nullable: false),
            string("Method", nullable: false),
            string("EntitySet", nullable: false),
            string("EntityKey", nullable: false),  // the key the request was queued with (a local one: ~1, -1)
            string("ServerKey"),  // the key the service gave, when it differs
            string("CustomTag"),
            string("TransactionID"),
            Property(name: "RepeatabilityID", type: .primitive(.guid), nullable: false),
            Property(name: "HTTPStatusCode", type: .primitive(.int32)),
            string("ETag"),
            string("Message"),
            Property(name: "Attempts", type: .primitive(.int32), nullable: false),
            Property(name: "CreatedAt", type: .primitive(.dateTimeOffset), nullable: false),
            Property(name: "DecidedAt", type: .primitive(.dateTimeOffset), nullable: false),
        ])

    static let types = [request, error, event, outcome]
}

extension Schema {
    /// The schema with the system sets added. Throws when the service's own schema already has a
    /// set by one of their names.
    package func withSystemSets() throws(EntityError) -> Schema {
        var s = self
        for name in SystemSets.names where s.entitySets[name] != nil && !isSystemSet(name) {
            throw .badInput(
                "the service has an entity set named '\(name)', which is the name of one of the store's own sets")
        }
        for (name, type) in zip(SystemSets.names, SystemSets.types) where s.entitySets[name] == nil {
            s.entityTypes[type.qualifiedName] = type
            s.entitySets[name] = EntitySet(name: name, entityType: type.qualifiedName)
            s.entitySetNames.append(name)
        }
        return s
    }

    /// Whether `set` is one of the store's own sets (not the service's).
    package func isSystemSet(_ set: String) -> Bool {
        entitySets[set]?.entityType.hasPrefix(SystemSets.namespace + ".") == true && SystemSets.names.contains(set)
    }

    /// The service's entity sets, without the system sets.
    package var serviceSetNames: [String] { entitySetNames.filter { !isSystemSet($0) } }
}
