import LMDB
/// The store's exact value types as `Codable` values, each as its OData literal text
/// (`"956.00"`, `"2026-11-23"`, `"2026-11-23T10:00:00Z"`, `"PT1H"`, `"10:30:00"`, a GUID): what a
/// typed collection's properties may use, and what JSON encoders write for them.
public protocol _EDMTextCodable: Codable, CustomStringConvertible {
    init?(edmText: String)
}

extension _EDMTextCodable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Self(edmText: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(text.prefix(80))' is not a valid \(Self.self)")
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

extension EDMDecimal: _EDMTextCodable { public init?(edmText: String) { self.init(edmText) } }
extension EDMDate: _EDMTextCodable { public init?(edmText: String) { self.init(edmText) } }
extension EDMDateTimeOffset: _EDMTextCodable { public init?(edmText: String) { self.init(edmText) } }
extension EDMTimeOfDay: _EDMTextCodable { public init?(edmText: String) { self.init(edmText) } }
extension EDMDuration: _EDMTextCodable { public init?(edmText: String) { self.init(edmText) } }
extension EDMGuid: _EDMTextCodable { public init?(edmText: String) { self.init(edmText) } }
