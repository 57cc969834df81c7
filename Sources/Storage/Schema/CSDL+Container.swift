import LMDB
/// Entity containers: entity sets, singletons, V4 bindings and V2/V3 association sets.
extension CSDLReader {
    /// All entity sets and singletons of all containers, in document order (first of a name wins).
    func readContainers() throws(CSDLError) -> [EntitySet] {
        var containerNames: Set<String> = []
        for (namespace, node) in containers {
            guard let name = node["Name"] else { continue }
            containerNames.insert(name)
            containerNames.insert(namespace + "." + name)
            if let alias = aliases.first(where: { $0.value == namespace })?.key {
                containerNames.insert(alias + "." + name)
            }
        }
        var sets: [EntitySet] = []
        var index: [String: Int] = [:]
        var associationSets: [CSDLNode] = []
        for (_, container) in containers {
            for node in container.children {
                let isSingleton = node.name == "Singleton"
                guard node.name == "EntitySet" || isSingleton else {
                    if node.name == "AssociationSet" { associationSets.append(node) }
                    continue
                }
                let name = try Self.required(node, "Name")
                let typeName = try Self.required(node, isSingleton ? "Type" : "EntityType")
                let type = qualify(typeName)
                guard entityTypes[type] != nil else {
                    throw CSDLError("unknown entity type '\(typeName)'", at: node)
                }
                var set = EntitySet(name: name, entityType: type, isSingleton: isSingleton)
                set.optimisticConcurrency =
                    Self.annotated(node, "OptimisticConcurrency")
                    || targeted.contains { target, annotations in
                        Self.stripContainer(target, containerNames) == name
                            && Self.annotated(annotations, "OptimisticConcurrency")
                    }
                for binding in node.children("NavigationPropertyBinding") {
                    let path = try Self.required(binding, "Path")
                    let target = try Self.required(binding, "Target")
                    set.navigationBindings[path] = Self.stripContainer(target, containerNames)
                }
                guard index[name] == nil else { continue }
                index[name] = sets.count
                sets.append(set)
            }
        }
        for node in associationSets {
            try bind(associationSet: node, sets: &sets, index: index)
        }
        return sets
    }

    /// `Container/Set` or `NS.Container/Set` → `Set`; other targets unchanged.
    static func stripContainer(_ target: String, _ containers: Set<String>) -> String {
        guard let slash = target.firstIndex(of: "/"), containers.contains(String(target[..<slash])) else {
            return target
        }
        return String(target[target.index(after: slash)...])
    }

    /// Binds the navigation properties that use an association set's association, on both its sets.
    func bind(associationSet node: CSDLNode, sets: inout [EntitySet], index: [String: Int]) throws(CSDLError) {
        let name = qualify(try Self.required(node, "Association"))
        guard let association = associations[name] else {
            throw CSDLError("unknown association '\(name)'", at: node)
        }
        let ends = node.children("End")
        guard ends.count == 2 else { throw CSDLError("an association set needs two End elements", at: node) }
        var roles: [(role: String, set: String)] = []
        for (position, end) in ends.enumerated() {
            let set = try Self.required(end, "EntitySet")
            let role = end["Role"] ?? association.ends[position].role
            guard association.end(role) != nil else {
                throw CSDLError("role '\(role)' is not an end of association '\(name)'", at: end)
            }
            guard index[set] != nil else { throw CSDLError("unknown entity set '\(set)'", at: end) }
            roles.append((role, set))
        }
        for (from, to) in [(roles[0], roles[1]), (roles[1], roles[0])] {
            guard let position = index[from.set] else { continue }
            var current: String? = sets[position].entityType
            var seen: Set<String> = []
            while let type = current, seen.insert(type).inserted {
                for (navigation, link) in links[type] ?? [:]
                where link.association == name && link.fromRole == from.role && link.toRole == to.role {
                    sets[position].navigationBindings[navigation] = to.set
                }
                current = entityTypes[type]?.baseType
            }
        }
    }
}
