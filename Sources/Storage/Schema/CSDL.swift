import LMDB
import Foundation

/// Reads CSDL `$metadata` documents (EDMX for OData V2, V3 and V4) into a `Schema`.
package enum CSDL {
    /// Parses a CSDL document (EDMX V2/V3/V4).
    package static func parse(_ data: [UInt8]) throws(CSDLError) -> Schema {
        let root = try CSDLNode.parse(data)
        var reader = CSDLReader()
        return try reader.read(root)
    }

    /// Parses a CSDL document (EDMX V2/V3/V4) given as text.
    package static func parse(_ text: String) throws(CSDLError) -> Schema {
        try parse(Array(text.utf8))
    }
}

/// Why a CSDL document could not be read: what is wrong, in which element, at which line.
public struct CSDLError: Error, CustomStringConvertible, Sendable, Hashable {
    public var message: String
    /// The offending element, as `Kind 'Name'` (e.g. `EntityType 'Customer'`).
    public var element: String?
    /// The XML line number, when known.
    public var line: Int?

    public init(_ message: String, element: String? = nil, line: Int? = nil) {
        self.message = message
        self.element = element
        self.line = line
    }

    init(_ message: String, at node: CSDLNode) {
        self.init(message, element: node.label, line: node.line)
    }

    public var description: String {
        var text = "CSDL error"
        if let line { text += " at line \(line)" }
        if let element { text += " in \(element)" }
        return text + ": " + message
    }
}

/// A V2/V3 association: its two ends and its optional referential constraint.
struct CSDLAssociation {
    struct End {
        var role: String
        var type: String
        var multiplicity: String
    }

    var ends: [End]
    var principalRole: String?
    var dependentRole: String?
    /// Principal and dependent property pairs, by position.
    var pairs: [ReferentialConstraint] = []

    func end(_ role: String) -> End? { ends.first { $0.role == role } }
}

/// How a V2/V3 navigation property uses its association.
struct CSDLLink: Hashable {
    var association: String
    var fromRole: String
    var toRole: String
}

/// The state of reading one document: declarations by qualified name, then the built types.
struct CSDLReader {
    var aliases: [String: String] = [:]
    var entityDecls: [String: CSDLNode] = [:]
    var entityOrder: [String] = []
    var complexDecls: [String: CSDLNode] = [:]
    var enumDecls: [String: CSDLNode] = [:]
    var typeDefinitions: [String: CSDLNode] = [:]
    var associationDecls: [String: CSDLNode] = [:]
    /// V4 `Action` and `Function` elements (every overload), with their schema's namespace.
    var operationDecls: [(namespace: String, node: CSDLNode)] = []
    var containers: [(namespace: String, node: CSDLNode)] = []
    /// `Annotations` elements by their `Target` (annotations of a model element from outside it).
    var targeted: [(target: String, node: CSDLNode)] = []

    var associations: [String: CSDLAssociation] = [:]
    var complexTypes: [String: ComplexType] = [:]
    var enumTypes: [String: EnumType] = [:]
    var entityTypes: [String: EntityType] = [:]
    /// Declared (not inherited) navigation properties per entity type.
    var ownNavigation: [String: [NavigationProperty]] = [:]
    /// V2/V3 association use of declared navigation properties: type → nav name → link.
    var links: [String: [String: CSDLLink]] = [:]

    mutating func read(_ root: CSDLNode) throws(CSDLError) -> Schema {
        guard root.name == "Edmx" else {
            throw CSDLError("not an EDMX document: root element is '\(root.name)'", at: root)
        }
        guard let services = root.child("DataServices") else {
            throw CSDLError("no DataServices element", at: root)
        }
        let version = try Self.version(root, services)
        let schemas = services.children("Schema")
        guard !schemas.isEmpty else { throw CSDLError("no Schema element", at: services) }

        try collect(references: root.children("Reference"), schemas: schemas)
        try readEnumTypes()
        try readComplexTypes()
        try readAssociations()
        try readEntityTypes()
        let sets = try readContainers()
        var schema = Schema(
            version: version, entityTypes: entityTypes, complexTypes: complexTypes,
            enumTypes: enumTypes, entitySets: sets)
        schema.operations = try readOperations(version)
        return schema
    }

    /// The protocol version from `edmx:Edmx Version` and `m:DataServiceVersion`.
    static func version(_ root: CSDLNode, _ services: CSDLNode) throws(CSDLError) -> ODataVersion {
        let edmx = root["Version"]
        switch edmx {
        case "4.0", "4.01": return .v4
        case nil, "1.0", "2.0", "3.0":
            switch services.attribute(local: "DataServiceVersion") {
            case "1.0", "2.0": return .v2
            case "3.0": return .v3
            case "4.0", "4.01": return .v4
            case nil: return edmx == "3.0" ? .v3 : .v2
            case let other?:
                throw CSDLError("unsupported DataServiceVersion '\(other)'", at: services)
            }
        case let other?:
            throw CSDLError("unsupported EDMX version '\(other)'", at: root)
        }
    }

    /// Records aliases and the declarations of all schemas by qualified name.
    mutating func collect(references: [CSDLNode], schemas: [CSDLNode]) throws(CSDLError) {
        for include in references.flatMap({ $0.children("Include") }) {
            if let ns = include["Namespace"], let alias = include["Alias"] { aliases[alias] = ns }
        }
        var namespaces: [(String, CSDLNode)] = []
        for schema in schemas {
            guard let ns = schema["Namespace"], !ns.isEmpty else {
                throw CSDLError("Schema without Namespace", at: schema)
            }
            if let alias = schema["Alias"], !alias.isEmpty { aliases[alias] = ns }
            namespaces.append((ns, schema))
        }
        for (ns, schema) in namespaces {
            for node in schema.children {
                let declared = ["EntityType", "ComplexType", "EnumType", "TypeDefinition", "Association"]
                if node.name == "EntityContainer" {
                    containers.append((ns, node))
                    continue
                }
                if node.name == "Annotations", let target = node["Target"] {
                    targeted.append((target, node))
                    continue
                }
                if node.name == "Action" || node.name == "Function" {
                    operationDecls.append((ns, node))
                    continue
                }
                guard declared.contains(node.name) else { continue }
                let name = try Self.required(node, "Name")
                let qualified = ns + "." + name
                switch node.name {
                case "EntityType":
                    if entityDecls[qualified] == nil { entityOrder.append(qualified) }
                    entityDecls[qualified] = node
                case "ComplexType": complexDecls[qualified] = node
                case "EnumType": enumDecls[qualified] = node
                case "TypeDefinition": typeDefinitions[qualified] = node
                default: associationDecls[qualified] = node
                }
            }
        }
    }

    /// A qualified name with its alias (if any) replaced by the namespace.
    func qualify(_ name: String) -> String {
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        guard let dot = trimmed.lastIndex(of: ".") else { return trimmed }
        if let ns = aliases[String(trimmed[..<dot])] { return ns + String(trimmed[dot...]) }
        return trimmed
    }

    /// Splits `Collection(T)` into `(T, true)`; other names into `(name, false)`.
    static func unwrapCollection(_ name: String) -> (name: String, isCollection: Bool) {
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("Collection("), trimmed.hasSuffix(")"), trimmed.count > 12 {
            return (String(trimmed.dropFirst(11).dropLast()), true)
        }
        return (trimmed, false)
    }

    static func required(_ node: CSDLNode, _ attribute: String) throws(CSDLError) -> String {
        guard let value = node[attribute], !value.isEmpty else {
            throw CSDLError("missing attribute \(attribute)", at: node)
        }
        return value
    }

    static func flag(_ node: CSDLNode, _ attribute: String, default value: Bool) -> Bool {
        guard let text = node[attribute]?.lowercased() else { return value }
        return text == "true" || text == "1" ? true : text == "false" || text == "0" ? false : value
    }
}
