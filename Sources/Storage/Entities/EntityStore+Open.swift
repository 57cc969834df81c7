package import LMDB
import Foundation

extension EntityStore {
    /// Creates a new store in directory `path` from a `$metadata` document and a configuration.
    ///
    /// Throws `EntityError.badInput` if a store already exists there, `CSDLError` for a document
    /// it cannot use, `EntityError` for a bad index definition. Nothing is left behind on failure.
    package static func create(
        path: String, metadata: [UInt8], configuration: StorageSettings,
        roles: [any StoreRole.Type] = []
    ) throws -> EntityStore {
        if FileManager.default.fileExists(atPath: path + "/data.mdb") {
            throw EntityError.badInput("a store already exists in '\(path)'")
        }
        let schema = try CSDL.parse(metadata)
        try schema.checkStorable(indexCount: configuration.indexes.values.reduce(0) { $0 + $1.count })
        if let cap = configuration.maxSizeBytes { try StorageSettings.checkMaxSize(cap) }
        // lstat, not fileExists: a symlink (even a dangling one, to a directory not yet made) is
        // the user's, and a failed create must leave it as it was.
        func present(_ p: String) -> Bool {
            var st = stat()
            return lstat(p, &st) == 0
        }
        let existed = present(path), lockExisted = present(path + "/lock.mdb")
        do {
            let env = try Environment(path: path, durability: configuration.durability)
            try env.setSizeCap(configuration.maxSizeBytes)
            let store = try EntityStore(
                environment: env, schema: schema, metadata: metadata, configuration: configuration, roles: roles)
            let meta = store.meta
            let config = Array(store.configuration.json.text.utf8)
            try store.write { t in
                try t.put(meta, formatKey, formatText(formatVersion))
                try t.put(meta, metadataKey, metadata)
                try t.put(meta, configKey, config)
            }
            return store
        } catch {
            try? FileManager.default.removeItem(atPath: path + "/data.mdb")
            if !lockExisted { try? FileManager.default.removeItem(atPath: path + "/lock.mdb") }
            if !existed { try? FileManager.default.removeItem(atPath: path) }
            throw error
        }
    }

    /// Opens the store in directory `path`, reading its schema and configuration from `meta`.
    ///
    /// With `readOnly`, nothing is created or repaired and writes throw; it works on a read-only
    /// file system and is what commands that only read use.
    ///
    /// `maxSizeBytes` changes the store's size cap (`StorageSettings.maxSizeBytes`; 0 lifts
    /// it) and records the change in its configuration, for every later open. It is applied
    /// before it is recorded, so raising the cap of a full store works.
    package static func open(
        path: String, durability: Durability? = nil, readOnly: Bool = false,
        maxSizeBytes: Int? = nil, roles: [any StoreRole.Type] = []
    ) throws -> EntityStore {
        if let cap = maxSizeBytes, cap != 0 { try StorageSettings.checkMaxSize(cap) }
        if maxSizeBytes != nil && readOnly {
            throw EntityError.badInput("the size cap of a store opened read-only cannot be changed")
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw EnvironmentError.notADirectory(path)
        }
        guard FileManager.default.fileExists(atPath: path + "/data.mdb") else {
            throw EntityError.badInput("no store in '\(path)' (run 'offline-store init' first)")
        }
        // The durability is part of the configuration; open the environment with it.
        let env = try Environment(path: path, readOnly: readOnly)
        guard let meta = try env.database(named: "meta", create: false) else {
            throw EntityError.badInput("'\(path)' is not an OfflineStore store (no meta database)")
        }
        let (format, metadata, configText) = try env.read { txn in
            (
                try txn.view.get(meta, formatKey).map(Array.init), try txn.view.get(meta, metadataKey).map(Array.init),
                try txn.view.get(meta, configKey).map(Array.init)
            )
        }
        guard let format, let version = formatNumber(format), let metadata, let configText else {
            throw EntityError.badInput(
                "'\(path)' is not an OfflineStore store (no format, metadata or configuration in meta)")
        }
        if version > formatVersion {
            throw EntityError.badInput(
                "the store in '\(path)' has format \(version), made by a newer offline-store; this one reads formats 1 to \(formatVersion)"
            )
        }
        if version < formatVersion && readOnly {
            throw EntityError.badInput(
                "the store in '\(path)' has format \(version); open it writable once (any writing command) to upgrade it to format \(formatVersion)"
            )
        }
        var configuration = try StorageSettings(json: try JSON.parse(configText))
        if let durability { configuration.durability = durability }
        if !readOnly { try env.setDurability(configuration.durability) }
        let capChanged = maxSizeBytes.map { ($0 == 0 ? nil : $0) != configuration.maxSizeBytes } ?? false
        if let cap = maxSizeBytes { configuration.maxSizeBytes = cap == 0 ? nil : cap }
        try env.setSizeCap(configuration.maxSizeBytes)
        let store = try EntityStore(
            environment: env, schema: try CSDL.parse(metadata), metadata: metadata, configuration: configuration,
            roles: roles)
        if capChanged { try store.saveConfiguration() }
        if version < formatVersion {
            // The new databases were created as the store opened; recording the format finishes the upgrade.
            try store.write { t in try t.put(meta, formatKey, formatText(formatVersion)) }
        }
        return store
    }

    static func formatText(_ version: Int) -> [UInt8] { Array("offline-store \(version)".utf8) }

    /// N of `offline-store N`, or nil for anything else.
    static func formatNumber(_ bytes: [UInt8]) -> Int? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.hasPrefix("offline-store "), let n = Int(text.dropFirst("offline-store ".count)), n >= 1 else {
            return nil
        }
        return n
    }
}
