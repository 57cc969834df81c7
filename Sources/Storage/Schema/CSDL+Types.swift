import LMDB
import Foundation

/// Enum, complex and entity types, with base types flattened in.
extension CSDLReader {
    mutating func readEnumTypes() throws(CSDLError) {
        for qualified in enumDecls.keys.sorted() {
            guard let node = enumDecls[qualified] else { continue }
            var underlying = EDMPrimitive.int32
            if let name = node["UnderlyingType"] {
                guard let primitive = EDMPrimitive(rawValue: qualify(name)), primitive.isInteger else {
                    throw CSDLError("UnderlyingType '\(name)' is not an integer type", at: node)
                }
                underlying = primitive
            }
            var members: [(name: String, value: Int64)] = []
            var next: Int64? = 0
            for member in node.children("Member") {
                let name = try Self.required(member, "Name")
                let value: Int64
                if let text = member["Value"] {
                    guard let parsed = Int64(text.trimmingCharacters(in: .whitespaces)) else {
                        throw CSDLError("invalid Value '\(text)'", at: member)
                    }
                    value = parsed
                } else {
                    guard let implicit = next else { throw CSDLError("implicit Value overflows", at: member) }
                    value = implicit
                }
                if let range = underlying.integerRange, !range.contains(value) {
                    throw CSDLError("Value \(value) is out of range for \(underlying.rawValue)", at: member)
                }
                members.append((name, value))
                next = value == .max ? nil : value + 1
            }
            enumTypes[qualified] = EnumType(
                name: node["Name"] ?? qualified, qualifiedName: qualified,
                underlying: underlying,
                isFlags: Self.flag(node, "IsFlags", default: false), members: members)
        }
    }

    mutating func readComplexTypes() throws(CSDLError) {
        for qualified in complexDecls.keys.sorted() {
            var parent: ComplexType?
            for name in try baseChain(qualified, complexDecls).reversed() {
                if let done = complexTypes[name] {
                    parent = done
                    continue
                }
                guard let node = complexDecls[name] else { continue }
                let properties = try properties(of: node, after: parent?.properties ?? [])
                let built = ComplexType(name: node["Name"] ?? name, qualifiedName: name, properties: properties)
                complexTypes[name] = built
                parent = built
            }
        }
    }

    mutating func readEntityTypes() throws(CSDLError) {
        for qualified in entityOrder {
            guard let node = entityDecls[qualified] else { continue }
            ownNavigation[qualified] = try declaredNavigation(of: qualified, node)
        }
        assignAssociationPartners()
        for qualified in entityOrder {
            var parent: EntityType?
            for name in try baseChain(qualified, entityDecls).reversed() {
                if let done = entityTypes[name] {
                    parent = done
                    continue
                }
                guard let node = entityDecls[name] else { continue }
                let built = try entityType(name, node, parent: parent)
                entityTypes[name] = built
                parent = built
            }
        }
        mirrorPrincipalConstraints()
    }

    /// One entity type on top of its (already flattened) base type.
    func entityType(_ qualified: String, _ node: CSDLNode, parent: EntityType?) throws(CSDLError) -> EntityType {
        let properties = try properties(of: node, after: parent?.properties ?? [])
        var key = parent?.key ?? []
        if let keyNode = node.child("Key") {
            var own: [String] = []
            for ref in keyNode.children("PropertyRef") {
                let name = try Self.required(ref, "Name")
                guard properties.contains(where: { $0.name == name }) else {
                    throw CSDLError("key property '\(name)' is not a property of \(node.label)", at: ref)
                }
                own.append(name)
            }
            if !own.isEmpty { key = own }
        }
        let isAbstract = Self.flag(node, "Abstract", default: false)
        guard !key.isEmpty || isAbstract else { throw CSDLError("entity type has no Key", at: node) }
        let isOpen = Self.flag(node, "OpenType", default: false) || parent?.isOpen == true
        // V4 `HasStream`, V2 `m:HasStream` (any prefix of the metadata namespace); inherited.
        let hasStream =
            parent?.hasStream == true
            || node.attributes.contains {
                ($0.key == "HasStream" || $0.key.hasSuffix(":HasStream")) && $0.value == "true"
            }
        var streams = parent?.streamProperties ?? []
        for child in node.children("Property")
        where qualify(Self.unwrapCollection(child["Type"] ?? "").0) == "Edm.Stream" {
            guard let name = child["Name"], !streams.contains(name) else { continue }
            guard !Self.unwrapCollection(child["Type"] ?? "").1 else {
                throw CSDLError("a collection of Edm.Stream is not a property OData allows", at: child)
            }
            streams.append(name)
        }
        return EntityType(
            name: node["Name"] ?? qualified, qualifiedName: qualified, key: key,
            properties: properties,
            navigationProperties: (parent?.navigationProperties ?? []) + (ownNavigation[qualified] ?? []),
            baseType: parent?.qualifiedName, isAbstract: isAbstract, isOpen: isOpen, hasStream: hasStream,
            streamProperties: streams)
    }

    /// The `Property` children of a type appended to its inherited properties.
    func properties(of node: CSDLNode, after inherited: [Property]) throws(CSDLError) -> [Property] {
        var properties = inherited
        var names = Set(inherited.map(\.name))
        for child in node.children("Property") {
            guard let property = try property(child) else { continue }
            guard names.insert(property.name).inserted else {
                throw CSDLError("duplicate property in \(node.label)", at: child)
            }
            properties.append(property)
        }
        return properties
    }

    /// Whether the service computes the property: a V4 `Core.Computed` annotation inside it (any
    /// alias of `Org.OData.Core.V1`), or V2's `sap:creatable="false"`. Annotations targeted from an
    /// `Annotations` element elsewhere are not read.
    static func computed(_ node: CSDLNode) -> Bool {
        if node.attributes.contains(where: { $0.key.hasSuffix(":creatable") && $0.value == "false" }) { return true }
        return node.children("Annotation").contains { a in
            guard let term = a["Term"], term.hasSuffix(".Computed") else { return false }
            return a["Bool"] != "false"
        }
    }

    /// Whether `node` holds an annotation with a term named `term` (any alias of its vocabulary).
    static func annotated(_ node: CSDLNode, _ term: String) -> Bool {
        node.children("Annotation").contains { $0["Term"]?.hasSuffix("." + term) == true }
    }

    /// A structural property, or nil for a stream property.
    func property(_ node: CSDLNode) throws(CSDLError) -> Property? {
        let name = try Self.required(node, "Name")
        let typeName = try Self.required(node, "Type")
        guard let type = try typeRef(typeName, at: node) else { return nil }
        return Property(
            name: name, type: type, nullable: Self.flag(node, "Nullable", default: true),
            maxLength: Self.integer(node["MaxLength"]), precision: Self.integer(node["Precision"]),
            scale: Self.integer(node["Scale"]), computed: Self.computed(node),
            concurrencyToken: node["ConcurrencyMode"] == "Fixed")
    }

    /// The type of a property: primitive, complex, enum, type definition or a collection; nil for streams.
    func typeRef(_ typeName: String, at node: CSDLNode) throws(CSDLError) -> TypeRef? {
        let (inner, isCollection) = Self.unwrapCollection(typeName)
        let name = qualify(inner)
        let element: TypeRef
        if name == "Edm.Stream" {
            return nil
        } else if let primitive = EDMPrimitive(typeName: name) {
            element = .primitive(primitive)
        } else if name == "Edm.PrimitiveType" {
            element = .primitive(.json)
        } else if complexDecls[name] != nil {
            element = .complex(name)
        } else if enumDecls[name] != nil {
            element = .enumeration(name)
        } else if let definition = typeDefinitions[name] {
            let underlying = definition["UnderlyingType"].map(qualify) ?? ""
            guard let primitive = EDMPrimitive(typeName: underlying) else {
                throw CSDLError("UnderlyingType '\(underlying)' is not a primitive type", at: definition)
            }
            element = .primitive(primitive)
        } else {
            throw CSDLError("unknown type '\(typeName)'", at: node)
        }
        return isCollection ? .collection(element) : element
    }

    /// A type and its base types, most derived first; fails on unknown bases and cycles.
    func baseChain(_ qualified: String, _ decls: [String: CSDLNode]) throws(CSDLError) -> [String] {
        var chain = [qualified]
        var seen: Set<String> = [qualified]
        var current = qualified
        while let node = decls[current], let base = node["BaseType"] {
            let name = qualify(base)
            guard decls[name] != nil else { throw CSDLError("unknown base type '\(base)'", at: node) }
            guard seen.insert(name).inserted else { throw CSDLError("BaseType cycle through '\(base)'", at: node) }
            chain.append(name)
            current = name
        }
        return chain
    }

    /// An integer facet; nil for absent, `max`, `variable`, `floating` or malformed values.
    static func integer(_ text: String?) -> Int? {
        text.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }
}
