/// A secondary index over one entity set: property paths in order, each ascending or descending.
///
/// Written as SAP's `indexed_type` writes it: `"Quantity DESC, ProductID"`; `"UNIQUE Email"` makes it
/// unique. Entries are `index tuple ‖ primary-key tuple → empty`, kept in the entity's transaction.
public struct IndexDefinition: Sendable, Hashable {
    public struct Component: Sendable, Hashable {
        /// Property path: `["Country"]`, or `["Address", "City"]` into a complex property.
        public var path: [String]
        public var descending: Bool

        public init(path: [String], descending: Bool = false) {
            self.path = path
            self.descending = descending
        }
    }

    public var entitySet: String
    public var components: [Component]
    public var unique: Bool
    /// Made by the store for a navigation property's foreign key, not by the configuration.
    public var automatic: Bool

    public init(entitySet: String, components: [Component], unique: Bool = false, automatic: Bool = false) {
        self.entitySet = entitySet
        self.components = components
        self.unique = unique
        self.automatic = automatic
    }

    /// The index's name: its definition in canonical form, e.g. `Quantity DESC,ProductID`.
    public var name: String {
        (unique ? "UNIQUE " : "") + components.map { $0.path.joined(separator: "/") + ($0.descending ? " DESC" : "") }
            .joined(separator: ",")
    }

    /// Name of the LMDB database holding the entries.
    public var databaseName: String { "i/\(entitySet)/\(name)" }

    /// Parses `"Quantity DESC, ProductID"` (optionally prefixed `UNIQUE`).
    public init(entitySet: String, definition: String, automatic: Bool = false) throws(EntityError) {
        var text = definition.trimmingCharacters(in: .whitespaces)
        var unique = false
        if text.uppercased().hasPrefix("UNIQUE ") {
            unique = true
            text = String(text.dropFirst(7))
        }
        var components: [Component] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let words = part.split(separator: " ", omittingEmptySubsequences: true)
            guard let path = words.first, words.count <= 2 else {
                throw .badIndexDefinition("'\(definition)' for '\(entitySet)': expected 'Property [ASC|DESC], …'")
            }
            var descending = false
            if words.count == 2 {
                switch words[1].uppercased() {
                case "ASC": descending = false
                case "DESC": descending = true
                default: throw .badIndexDefinition("'\(definition)' for '\(entitySet)': '\(words[1])' is not ASC or DESC")
                }
            }
            components.append(Component(path: path.split(separator: "/").map(String.init), descending: descending))
        }
        guard !components.isEmpty else { throw .badIndexDefinition("empty index for '\(entitySet)'") }
        self.init(entitySet: entitySet, components: components, unique: unique, automatic: automatic)
    }
}

extension String {
    func trimmingCharacters(in set: CharacterSetLite) -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}

/// Only whitespace trimming is needed here; avoids importing Foundation into this file.
enum CharacterSetLite { case whitespaces }
