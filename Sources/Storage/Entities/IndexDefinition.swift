import LMDB
/// A secondary index over one entity set: property paths in order, each ascending or descending.
///
/// Written as SAP's `indexed_type` writes it: `"Quantity DESC, ProductID"`; `"UNIQUE Email"` makes it
/// unique. Entries are `index tuple ‖ primary-key tuple → empty`, kept in the entity's transaction.
///
/// A covering index carries chosen properties in its entries' values: `"ProductID INCLUDE Quantity,
/// NetAmount"`. Its value is then a row (the entity row format) holding the key properties, the
/// index's own properties and the included ones, kept exact by every write; a query needing no
/// other property is answered from the index without reading the entity rows.
package struct IndexDefinition: Sendable, Hashable {
    package struct Component: Sendable, Hashable {
        /// Property path: `["Country"]`, or `["Address", "City"]` into a complex property.
        package var path: [String]
        package var descending: Bool

        package init(path: [String], descending: Bool = false) {
            self.path = path
            self.descending = descending
        }
    }

    package var entitySet: String
    package var components: [Component]
    package var unique: Bool
    /// Made by the store for a navigation property's foreign key, not by the configuration.
    package var automatic: Bool
    /// Top-level properties carried in the entries' values (`INCLUDE`), in the order given; empty
    /// for a plain index.
    package var included: [String]

    package init(
        entitySet: String, components: [Component], unique: Bool = false, automatic: Bool = false,
        included: [String] = []
    ) {
        self.entitySet = entitySet
        self.components = components
        self.unique = unique
        self.automatic = automatic
        var seen = Set<String>()
        self.included = included.filter { seen.insert($0).inserted }
    }

    /// The index's name: its definition in canonical form, e.g. `Quantity DESC,ProductID`. The
    /// `INCLUDE` list is not part of it: the name (and the database) stay when the list changes.
    package var name: String {
        (unique ? "UNIQUE " : "")
            + components.map { $0.path.joined(separator: "/") + ($0.descending ? " DESC" : "") }
            .joined(separator: ",")
    }

    /// The `INCLUDE` list in canonical form (`Quantity,NetAmount`), empty for a plain index.
    package var includedText: String { included.joined(separator: ",") }

    /// What an index's ready marker records of its INCLUDE list: the names sorted (the carried
    /// row does not depend on their order). Empty for a plain index.
    var includedMarker: String { included.sorted().joined(separator: ",") }

    /// The whole definition in canonical form, as the configuration keeps it:
    /// `ProductID INCLUDE Quantity,NetAmount`, or just the name.
    package var text: String { included.isEmpty ? name : name + " INCLUDE " + includedText }

    /// Name of the LMDB database holding the entries.
    package var databaseName: String { "i/\(entitySet)/\(name)" }

    /// Parses `"Quantity DESC, ProductID"` (optionally prefixed `UNIQUE`, optionally followed by
    /// `INCLUDE Prop, …`).
    package init(entitySet: String, definition: String, automatic: Bool = false) throws(EntityError) {
        var text = definition.trimmingCharacters(in: .whitespaces)
        var included: [String] = []
        let words = text.split(separator: " ", omittingEmptySubsequences: true)
        if let at = words.firstIndex(where: { $0.uppercased() == "INCLUDE" }) {
            let list = words[(at + 1)...].joined(separator: " ")
            guard !list.isEmpty else {
                throw .badIndexDefinition("'\(definition)' for '\(entitySet)': INCLUDE names no property")
            }
            for part in list.split(separator: ",", omittingEmptySubsequences: false) {
                let name = String(part).trimmingCharacters(in: .whitespaces)
                guard !name.isEmpty, !name.contains(" "), !name.contains("/") else {
                    throw .badIndexDefinition(
                        "'\(definition)' for '\(entitySet)': INCLUDE takes top-level property names separated by commas"
                    )
                }
                included.append(name)
            }
            text = words[..<at].joined(separator: " ")
        }
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
                default:
                    throw .badIndexDefinition("'\(definition)' for '\(entitySet)': '\(words[1])' is not ASC or DESC")
                }
            }
            components.append(Component(path: path.split(separator: "/").map(String.init), descending: descending))
        }
        guard !components.isEmpty else { throw .badIndexDefinition("empty index for '\(entitySet)'") }
        self.init(
            entitySet: entitySet, components: components, unique: unique, automatic: automatic, included: included)
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
