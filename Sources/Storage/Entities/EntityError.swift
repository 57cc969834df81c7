import LMDB
/// A write or read that the schema or the store's contents refuse. Nothing was changed.
public enum EntityError: Error, Sendable, Hashable, CustomStringConvertible {
    case unknownEntitySet(String)
    case unknownProperty(set: String, property: String)
    case typeMismatch(property: String, expected: String, got: String)
    case nullNotAllowed(property: String)
    case tooLong(property: String, maxLength: Int, length: Int)
    case outOfRange(property: String, type: String, value: String)
    case missingKey(set: String, property: String)
    case keyTooLong(set: String, length: Int)
    case indexKeyTooLong(index: String, length: Int)
    case duplicateKey(set: String, key: String)
    case notFound(set: String, key: String)
    case uniqueViolation(index: String, key: String)
    case keyChange(set: String, property: String)
    case corruptRow(set: String, key: String, reason: String)
    case badKeyPredicate(String)
    case unknownIndex(set: String, index: String)
    case badIndexDefinition(String)
    case badInput(String)

    public var description: String {
        switch self {
        case .unknownEntitySet(let s): "unknown entity set '\(s)'"
        case .unknownProperty(let s, let p): "unknown property '\(p)' for entity set '\(s)'"
        case .typeMismatch(let p, let e, let g): "property '\(p)': expected \(e), got \(_excerpt(g))"
        case .nullNotAllowed(let p): "property '\(p)' cannot be null"
        case .tooLong(let p, let m, let l): "property '\(p)' is \(l) characters long; MaxLength is \(m)"
        case .outOfRange(let p, let t, let v): "property '\(p)': \(_excerpt(v)) is out of range for \(t)"
        case .missingKey(let s, let p): "key property '\(p)' of entity set '\(s)' is missing or null"
        case .keyTooLong(let s, let l):
            "key of entity set '\(s)' encodes to \(l) bytes; the limit is \(KeyCodec.maxKeySize)"
        case .indexKeyTooLong(let i, let l):
            "entry of index '\(i)' encodes to \(l) bytes; the limit is \(KeyCodec.maxKeySize)"
        case .duplicateKey(let s, let k): "entity \(s)(\(_excerpt(k))) already exists"
        case .notFound(let s, let k): "entity \(s)(\(_excerpt(k))) does not exist"
        case .uniqueViolation(let i, let k): "unique index '\(i)' already has an entry for (\(_excerpt(k)))"
        case .keyChange(let s, let p): "key property '\(p)' of entity set '\(s)' cannot be changed by an update"
        case .corruptRow(let s, let k, let r): "stored row \(s)(\(_excerpt(k))) is corrupt: \(r)"
        case .badKeyPredicate(let m): m
        case .unknownIndex(let s, let i): "entity set '\(s)' has no index '\(i)'"
        case .badIndexDefinition(let m): "bad index definition: \(m)"
        case .badInput(let m): m
        }
    }
}

/// A value as an error message shows it: at most `limit` characters, then how many were left out,
/// so a 100,000-digit number in the input does not become a 100,000-character message.
package func _excerpt(_ text: String, limit: Int = 64) -> String {
    guard text.count > limit else { return text }
    return String(text.prefix(limit)) + "… (\(text.count) characters)"
}
